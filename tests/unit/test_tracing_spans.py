"""troupe's spans with the real OpenTelemetry SDK (actors/ops/tracing.py, trace_export.py): what
each hook opens, how each span ends (once), the context it passes on, the attributes it carries
(never an argument value), and the export's counts. Spans are read from an in-memory exporter
added beside troupe's own export, which points at a port nobody listens on."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from actors.downstream.calls import Call
from actors.messages import UpstreamError
from actors.ops import trace_context
from actors.ops.trace_export import BatchExport, CountingExporter, ExportCounts
from actors.ops.tracing import Tracing, traced_of
from actors.protocol import jsonrpc, modern
from actors.workflows.runner import INTERNAL_ID
from tests.support import wait_until

CLIENT_TRACE, CLIENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
SECRET = "hunter2-argument"


@pytest.fixture
def tracing():
    tracing = Tracing("http://127.0.0.1:1/v1/traces", "unit", 0.5, "http")
    memory = InMemorySpanExporter()
    tracing.recorder.add_processor(SimpleSpanProcessor(memory))
    tracing.memory = memory  # type: ignore[attr-defined]
    yield tracing
    tracing.stop(0.5)


def _session(key="s1", client=None, profile=None):
    return SimpleNamespace(key=key, view=SimpleNamespace(client_name=client, profile=profile),
                           handshake=SimpleNamespace(protocol_version="2025-11-25"))


def _params(meta=None, name="srv__tool") -> dict:
    params: dict = {"name": name, "arguments": {"token": SECRET}}
    if meta is not None:
        params["_meta"] = meta
    return params


class Front:
    """A front's sink: what it was given, and its own hooks (read through the wrapper)."""

    def __init__(self):
        self.got, self.principal, self.withdrawn_ids = [], "alice", []

    def __call__(self, message):
        self.got.append(message)

    def withdrawn(self, rid):  # a legacy POST's hook (serve/post_wait.py): its request ends unanswered
        self.withdrawn_ids.append(rid)


def _spans(tracing):
    tracing.later.run()  # the spans' deferred work (actors/ops/trace_later.py), as an idle hub runs it
    return tracing.memory.get_finished_spans()


def _forwarded(sink, params, server="srv", method="tools/call") -> Call:
    call = Call(1, sink, None, 1, "forwarded")
    call.server, call.method, call.params = server, method, params
    return call


def test_a_client_request_is_a_server_span_ended_once_by_its_answer(tracing):
    front = Front()
    sink = tracing.served(_session(client="alice", profile=SimpleNamespace(name="dev")), 9, "tools/call",
                          _params({"traceparent": CLIENT_PARENT}), front)
    assert sink.principal == "alice"  # the front's own attributes and hooks read through
    sink.withdrawn(9)
    assert front.withdrawn_ids == [9]
    sink(jsonrpc.notification("notifications/progress", {"progress": 1}))  # not the answer
    assert not _spans(tracing)
    sink(jsonrpc.result(9, {"content": []}))
    sink(jsonrpc.result(9, {"content": []}))  # a second answer (never sent, but) ends nothing twice
    assert len(front.got) == 3
    (span,) = _spans(tracing)
    assert span.kind is SpanKind.SERVER and span.name == "tools/call srv__tool"
    assert f"{span.context.trace_id:032x}" == CLIENT_TRACE and f"{span.parent.span_id:016x}" == CLIENT_SPAN
    attributes = dict(span.attributes)
    assert attributes == {"mcp.method.name": "tools/call", "gen_ai.tool.name": "srv__tool",
                          "gen_ai.operation.name": "execute_tool", "jsonrpc.request.id": "9",
                          "network.transport": "tcp", "network.protocol.name": "http",
                          "mcp.session.id": attributes["mcp.session.id"], "mcp.protocol.version": "2025-11-25",
                          "troupe.client": "alice", "troupe.profile": "dev", "troupe.outcome": "ok"}
    assert len(attributes["mcp.session.id"]) == 32 and "s1" not in attributes["mcp.session.id"]


def test_errors_tool_errors_and_cache_hits_mark_the_server_span(tracing):
    for rid, answer in ((1, jsonrpc.error(1, jsonrpc.INVALID_PARAMS, f"bad argument {SECRET}")),
                        (2, jsonrpc.result(2, {"content": [{"type": "text", "text": SECRET}], "isError": True})),
                        (3, jsonrpc.result(3, {"content": [], "_meta": {"troupe/cache": {"hit": True, "age_s": 1.5}}}))):
        tracing.served(_session(), rid, "tools/call", _params(), Front())(answer)
    error, tool_error, hit = sorted(_spans(tracing), key=lambda s: s.attributes["jsonrpc.request.id"])
    assert error.status.status_code is StatusCode.ERROR and error.status.description is None
    assert (error.attributes["error.type"], error.attributes["rpc.response.status_code"],
            error.attributes["rpc.jsonrpc.error_code"]) == ("-32602", "-32602", -32602)
    assert tool_error.attributes["error.type"] == "tool_error" and tool_error.status.status_code is StatusCode.ERROR
    assert [(e.name, dict(e.attributes)) for e in hit.events] == [("troupe.cache.hit", {"troupe.cache.age_s": 1.5})]
    for span in _spans(tracing):
        assert SECRET not in repr(dict(span.attributes)) + repr([dict(e.attributes) for e in span.events])


def test_an_upstream_request_is_a_client_span_whose_context_replaces_the_clients_in_meta(tracing):
    front = Front()
    sink = tracing.served(_session(), 4, "tools/call", _params({"traceparent": CLIENT_PARENT}), front)
    upstream = {"name": "tool", "arguments": {"token": SECRET}, "_meta": {"traceparent": CLIENT_PARENT, "k": 1}}
    call = _forwarded(sink, upstream)
    sent = tracing.sending(call, None)
    assert call.params is upstream and upstream["_meta"]["traceparent"] == CLIENT_PARENT  # kept for a retry
    assert set(sent["_meta"]) == {"traceparent", "k"} and sent["arguments"] == {"token": SECRET}
    version, trace_id, parent, flags = sent["_meta"]["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", CLIENT_TRACE, "01") and parent != CLIENT_SPAN
    call.span.end({"content": []})
    call.span.end("the call was answered")  # the table's fallback after the answer: nothing more
    sink(jsonrpc.result(4, {"content": []}))
    client, server = _spans(tracing)
    assert client.kind is SpanKind.CLIENT and client.name == "tools/call tool"
    assert f"{client.context.span_id:016x}" == parent and client.parent.span_id == server.context.span_id
    assert dict(client.attributes) == {"mcp.method.name": "tools/call", "gen_ai.tool.name": "tool",
                                       "gen_ai.operation.name": "execute_tool", "troupe.server": "srv",
                                       "network.transport": "pipe", "troupe.outcome": "ok"}
    assert server.attributes["troupe.server"] == "srv"


def test_an_http_upstreams_client_span_names_its_address(tracing):
    sink = tracing.served(_session(), 1, "resources/read", {"uri": "file:///notes/a.txt?token=x#frag"}, Front())
    # (the URI as troupe shows URLs: query values and fragment replaced, they may be secrets)
    call = _forwarded(sink, {"uri": "file:///a.txt"}, method="resources/read")
    view = SimpleNamespace(config=SimpleNamespace(http=SimpleNamespace(url="https://api.example.com/mcp")))
    tracing.sending(call, view)
    call.span.end(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "gone", server="srv", link_lost=True))
    sink(jsonrpc.error(1, jsonrpc.SERVER_UNAVAILABLE, "gone"))
    client, server = _spans(tracing)
    assert (client.attributes["network.transport"], client.attributes["server.address"],
            client.attributes["server.port"]) == ("tcp", "api.example.com", 443)
    assert client.attributes["error.type"] == str(jsonrpc.SERVER_UNAVAILABLE)
    assert [e.name for e in client.events] == ["troupe.upstream.lost"]
    assert server.name == "resources/read" and server.attributes["mcp.resource.uri"] == "file:///notes/a.txt?token=***#***"


def test_a_second_send_of_the_same_request_is_a_retry_event_and_a_new_client_span(tracing):
    sink = tracing.served(_session(), 1, "prompts/get", {"name": "greet", "arguments": {"who": SECRET}}, Front())
    call = _forwarded(sink, {"name": "greet", "arguments": {"who": SECRET}}, method="prompts/get")
    tracing.sending(call, None)
    call.span.end(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "lost", server="srv", link_lost=True))
    tracing.sending(call, None)
    call.span.end({"messages": []})
    sink(jsonrpc.result(1, {"messages": []}))
    first, second, server = _spans(tracing)
    assert first.name == second.name == "prompts/get greet" and first.context.span_id != second.context.span_id
    assert server.attributes["gen_ai.prompt.name"] == "greet"
    assert [(e.name, e.attributes["troupe.attempt"]) for e in server.events] == [("troupe.retry", 2)]


def test_a_withdrawn_call_ends_its_spans_as_cancelled(tracing):
    sink = tracing.served(_session(), 5, "tools/call", _params(), Front())
    call = _forwarded(sink, _params())
    tracing.sending(call, None)
    call.span.end("cancelled by client")  # the CallTable, as the call leaves it
    tracing.withdrawn(sink, "cancelled by client")
    tracing.withdrawn(sink, "cancelled by client")
    sink(jsonrpc.result(5, {}))  # a late answer (never sent once withdrawn) ends nothing again
    client, server = _spans(tracing)
    assert client.attributes["troupe.outcome"] == server.attributes["troupe.outcome"] == "cancelled"
    assert server.status.status_code is StatusCode.UNSET


def test_untraced_methods_keep_their_sink_and_a_modern_sink_still_finds_the_trace(tracing):
    front = Front()
    assert tracing.served(_session(), 1, "tools/list", {}, front) is front
    meta = {modern.META_VERSION: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "traceparent": CLIENT_PARENT}
    traced = tracing.served(_session(), 2, "tools/call", _params(meta), front)
    wrapped = modern.finishing_sink(2, "tools/call", traced)
    assert traced_of(wrapped) is traced
    assert tracing.served(_session(), 2, "tools/call", _params(meta), wrapped) is wrapped  # handled again: kept
    wrapped(jsonrpc.result(2, {"content": []}))
    (span,) = _spans(tracing)
    assert span.attributes["mcp.protocol.version"] == "2026-07-28" and "mcp.session.id" not in span.attributes


def test_a_workflow_runs_steps_as_internal_spans_and_its_step_requests_hang_from_them(tracing):
    from actors.workflows.definitions import Step

    outer = tracing.served(_session(), 1, "tools/call", _params({"traceparent": CLIENT_PARENT}), Front())
    steps = tracing.steps(outer, "deploy")
    step = Step(id="build", tool="ci__build", args={})
    params = steps.started(f"{INTERNAL_ID}1", step, {"name": "ci__build", "arguments": {"token": SECRET}})
    inner = tracing.served(_session(), f"{INTERNAL_ID}1", "tools/call", params, Front())  # the step's own request
    call = _forwarded(inner, {"name": "build", "_meta": params["_meta"]})
    tracing.sending(call, None)
    call.span.end({"content": []})
    inner(jsonrpc.result(f"{INTERNAL_ID}1", {"content": []}))
    steps.ended(f"{INTERNAL_ID}1", jsonrpc.result(f"{INTERNAL_ID}1", {"content": []}))
    timed_out = steps.started(f"{INTERNAL_ID}2", Step(id="test", tool="ci__test", args={}), {"name": "ci__test"})
    assert timed_out["_meta"]["traceparent"] != params["_meta"]["traceparent"]
    steps.ended(f"{INTERNAL_ID}2", reason="the workflow's deadline for this step passed")
    steps.ended(f"{INTERNAL_ID}2", reason="again")  # ended once
    outer(jsonrpc.result(1, {"content": []}))
    client, build, test, server = _spans(tracing)
    assert [s.kind for s in (client, build, test, server)] == [SpanKind.CLIENT, SpanKind.INTERNAL,
                                                                SpanKind.INTERNAL, SpanKind.SERVER]
    assert build.parent.span_id == test.parent.span_id == server.context.span_id
    assert client.parent.span_id == build.context.span_id  # no SERVER span for the step's own request
    assert dict(build.attributes) == {"troupe.workflow": "deploy", "troupe.workflow.step": "build",
                                      "gen_ai.tool.name": "ci__build", "troupe.outcome": "ok"}
    assert test.attributes["error.type"] == "timeout"


class _Scripted:
    """An exporter answering each batch with what the test scripted (unit test stand-in)."""

    def __init__(self, *answers):
        self.answers, self.gate = list(answers), threading.Event()

    def export(self, spans):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def shutdown(self):
        pass

    def force_flush(self, timeout_millis=0):
        return True


def test_the_export_counts_what_the_collector_took_and_what_was_dropped():
    counts = ExportCounts()
    exporter = CountingExporter(_Scripted(SpanExportResult.SUCCESS, SpanExportResult.FAILURE, RuntimeError("x")),
                                counts)
    assert exporter.export([object()] * 3) is SpanExportResult.SUCCESS
    assert exporter.export([object()] * 2) is SpanExportResult.FAILURE
    assert exporter.export([object()]) is SpanExportResult.FAILURE
    assert counts.snapshot(0) == {"spans_exported": 3, "spans_dropped": 3, "export_failures": 2, "spans_queued": 0}


def test_spans_a_full_queue_drops_are_counted_and_what_stop_leaves_too(tracing):
    class Stuck(_Scripted):
        def export(self, spans):
            self.batches.append(len(spans))
            self.gate.wait(10)
            return SpanExportResult.SUCCESS
    stuck, counts = Stuck(), ExportCounts()
    stuck.batches = []
    processor = BatchExport(CountingExporter(stuck, counts), counts, max_queue=2, batch=2, delay_s=60)
    tracing.recorder.add_processor(processor)
    for _ in range(2):  # a full batch wakes the worker, which then waits on the collector with it
        tracing.recorder.start("a", SpanKind.INTERNAL, None, {}).end()
    wait_until(lambda: stuck.batches == [2], timeout=5, message="the first batch taken")
    for _ in range(3):  # two fill the queue, the third pushes the oldest out
        tracing.recorder.start("b", SpanKind.INTERNAL, None, {}).end()
    assert counts.snapshot(processor.queued()) == {"spans_exported": 0, "spans_dropped": 1, "export_failures": 0,
                                                   "spans_queued": 2}
    processor.shutdown(timeout_millis=100)  # the worker is still stuck: the two queued are dropped
    assert counts.snapshot(processor.queued())["spans_dropped"] == 3
    stuck.gate.set()
    wait_until(lambda: counts.snapshot(0)["spans_exported"] == 2, timeout=5, message="the stuck batch counted")
    tracing.recorder.start("after", SpanKind.INTERNAL, None, {}).end()  # a stopped export takes nothing more
    assert processor.queued() == 0


def test_a_quiet_export_still_leaves_within_its_delay(tracing):
    got = []

    class Taking(_Scripted):
        def export(self, spans):
            got.extend(span.name for span in spans)
            return SpanExportResult.SUCCESS
    counts = ExportCounts()
    processor = BatchExport(CountingExporter(Taking(), counts), counts, batch=100, delay_s=0.05)
    tracing.recorder.add_processor(processor)
    tracing.recorder.start("lonely", SpanKind.INTERNAL, None, {}).end()
    wait_until(lambda: got == ["lonely"], timeout=5, message="the span exported on the delay")
    assert processor.force_flush(1000) and counts.snapshot(0)["spans_exported"] == 1
    processor.shutdown(timeout_millis=1000)


def test_sampling_follows_the_otel_variables_and_an_unsampled_span_still_passes_its_context_on():
    from actors.ops.spans import Parent, Sampler, SpanRecorder

    client_sampled = Parent(int(CLIENT_TRACE, 16), int(CLIENT_SPAN, 16), 1, "", True)
    client_unsampled = client_sampled._replace(flags=0)
    default = Sampler({})
    assert default.sampled(5, None) and default.sampled(5, client_sampled) and not default.sampled(5, client_unsampled)
    off = Sampler({"OTEL_TRACES_SAMPLER": "always_off"})
    assert not off.sampled(5, None) and not off.sampled(5, client_sampled)
    ratio = Sampler({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"})
    assert ratio.sampled(1, client_unsampled) and not ratio.sampled((1 << 64) - 1, client_sampled)
    assert Sampler({"OTEL_TRACES_SAMPLER": "nonsense"}).follows_parent
    exported = []
    recorder = SpanRecorder("unit", {"OTEL_TRACES_SAMPLER": "always_off"})
    recorder.add_processor(SimpleNamespace(on_end=exported.append))
    span = recorder.start("x", SpanKind.SERVER, client_sampled, {})
    version, trace_id, _, flags = span.carrier()["traceparent"].split("-")
    assert (trace_id, flags) == (CLIENT_TRACE, "00")  # the next hop hears it is not sampled
    span.end()
    root = recorder.start("y", SpanKind.SERVER, None, {})
    assert root.carrier()["traceparent"].endswith("-02")  # random trace id, not sampled
    root.end()
    assert exported == []


def test_the_report_and_metrics_name_the_counts(tracing):
    from actors.ops import trace_metrics

    assert set(tracing.report()) == {"spans_exported", "spans_dropped", "export_failures", "spans_queued"}
    names = [family.name for family in trace_metrics.families(tracing.report())]
    assert names == ["troupe_trace_spans_exported", "troupe_trace_spans_dropped", "troupe_trace_export_failures",
                     "troupe_trace_spans_queued"]
    assert list(trace_metrics.families(None)) == []
    assert trace_context.TRACED_METHODS == {"tools/call", "resources/read", "prompts/get"}
