"""OpenTelemetry traces across troupe (issue 29): a real OTLP/HTTP receiver (tests/support/
otlp_receiver.py) takes the spans of a running troupe serving HTTP, in front of a stdio and an
HTTP upstream that report the trace context they received (tests/servers/trace_probe.py). One
trace runs from the client through troupe's SERVER span and its CLIENT spans to each upstream,
in either era, through a workflow's steps; no argument value is ever in a span; with the collector
not answering, calls go on as fast and the dropped spans are counted in /metrics."""
from __future__ import annotations

import json
import secrets
import socket
import statistics
import subprocess
import threading
import time

import orjson
import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support import PYTHON, ROOT, wait_until
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.ports import start_announced, stop
from tests.support.troupe import Troupe, TroupeHttp, server, write_config

SECRET = "s3cr3t-" + secrets.token_hex(6)  # an argument value: in no span, ever
SERVICE = "troupe-e2e"
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "trace-test", "version": "1"}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
WORKFLOW = {"name": "probe_both", "input_schema": {"type": "object", "properties": {"secret": {"type": "string"}}},
            "steps": [{"id": "first", "tool": "pstd__probe", "args": {"secret": "{{ input.secret }}"}},
                      {"id": "second", "tool": "phttp__probe", "args": {"secret": "{{ input.secret }}"}}]}


def _traceparent(trace_id: str | None = None, parent: str | None = None) -> tuple[str, str, str]:
    trace_id, parent = trace_id or secrets.token_hex(16), parent or secrets.token_hex(8)
    return f"00-{trace_id}-{parent}-01", trace_id, parent


def _start_troupe(tmp_path, endpoint: str, **telemetry) -> tuple[TroupeHttp, object, int]:
    probe, port = start_announced([PYTHON, "-m", "tests.servers.trace_probe", "--http", "--port", "0"],
                                  tmp_path / "probe.log")
    http_probe = {"name": "phttp", "pin": False,
                  "transport": {"type": "streamable-http", "streamable_http": {"url": f"http://127.0.0.1:{port}/mcp"}}}
    path = write_config(tmp_path, [server("pstd", "tests.servers.trace_probe", pin=False), http_probe,
                                   server("hang", "tests.servers.hang", pin=False)],
                        mode="flat", json_response=True)
    data = yaml.safe_load(path.read_text())
    data.update(telemetry={"otlp_endpoint": endpoint, "service_name": SERVICE, **telemetry}, workflows=[WORKFLOW],
                audit={"file": str(tmp_path / "audit.jsonl")})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    try:
        return TroupeHttp(path), probe, port
    except BaseException:
        stop(probe)
        raise


class Session:
    """A legacy Streamable HTTP session with troupe (JSON answers)."""

    def __init__(self, url: str) -> None:
        self.url, self.headers, self.next_id = url, dict(ACCEPT), 0
        answer = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                             "clientInfo": {"name": "trace-test", "version": "1"}})
        assert "result" in answer, answer
        requests.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers,
                      timeout=10).close()

    def request(self, method: str, params: dict, headers: dict | None = None) -> dict:
        self.next_id += 1
        resp = requests.post(self.url, json={"jsonrpc": "2.0", "id": self.next_id, "method": method,
                                             "params": params}, headers={**self.headers, **(headers or {})},
                             timeout=30)
        if "Mcp-Session-Id" in resp.headers:
            self.headers.update({"Mcp-Session-Id": resp.headers["Mcp-Session-Id"],
                                 "MCP-Protocol-Version": "2025-11-25"})
        return resp.json()

    def call(self, tool: str, arguments: dict, headers: dict | None = None, meta: dict | None = None) -> dict:
        params: dict = {"name": tool, "arguments": arguments}
        if meta is not None:
            params["_meta"] = meta
        return self.request("tools/call", params, headers)


def _probed(answer: dict) -> dict:
    assert "result" in answer and not answer["result"].get("isError"), answer
    return json.loads(answer["result"]["content"][0]["text"])


def _parent_of(traceparent: str) -> tuple[str, str]:
    version, trace_id, parent, flags = traceparent.split("-")
    assert version == "00" and int(flags, 16) & 1, traceparent  # sampled (a trace troupe starts is marked random too)
    return trace_id, parent


def _no_secret(spans: list[dict]) -> None:
    for span in spans:
        assert SECRET not in orjson.dumps(span).decode(), span


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """(receiver, troupe, HTTP probe's port), shared by the tests below: each finds its spans by its own trace id."""
    tmp = tmp_path_factory.mktemp("traces")
    receiver = OtlpReceiver()
    t, probe, port = _start_troupe(tmp, receiver.url)
    t.audit_path = tmp / "audit.jsonl"  # type: ignore[attr-defined]  # the audit trail _start_troupe configures
    try:
        wait_until(lambda: _listed(t.url), timeout=30, message="both probes listed")
        yield receiver, t, port
        # a stdio server's launch forks troupe: no hook of the SDK may run troupe on in the child
        assert sum(line.startswith("troupe: serving ") for line in t.stderr) == 1, "".join(t.stderr)
    finally:
        try:
            assert t.stop() == 0
        finally:
            stop(probe)
            receiver.stop()


def _listed(url: str) -> bool:
    tools = Session(url).request("tools/list", {}).get("result", {}).get("tools", [])
    return {"pstd__probe", "phttp__probe", "hang__hang"} <= {tool["name"] for tool in tools}


def _in_trace(receiver: OtlpReceiver, trace_id: str, kinds: dict[str, int]):
    """The spans of `trace_id` once at least `kinds[kind]` of each kind have arrived."""
    def enough(spans):
        mine = [s for s in spans if s["trace_id"] == trace_id]
        return mine if all(sum(s["kind"] == k for s in mine) >= n for k, n in kinds.items()) else None
    return receiver.wait_for(enough)


def test_one_trace_runs_from_the_client_through_troupe_to_a_stdio_and_an_http_upstream(traced):
    receiver, t, port = traced
    session = Session(t.url)
    traceparent, trace_id, client_span = _traceparent()
    header = {"traceparent": traceparent, "tracestate": "vendor=abc"}
    stdio = _probed(session.call("pstd__probe", {"secret": SECRET}, header))
    http = _probed(session.call("phttp__probe", {"secret": SECRET}, header))

    # Each upstream got troupe's own context: the client's trace, troupe's span as the parent, the
    # client's tracestate carried on; over HTTP the same in the headers.
    seen = {}
    for name, report in (("pstd", stdio), ("phttp", http)):
        got_trace, got_parent = _parent_of(report["meta"]["traceparent"])
        assert got_trace == trace_id and got_parent != client_span, report
        assert report["meta"]["tracestate"] == "vendor=abc", report
        seen[name] = got_parent
    assert http["headers"] == {"traceparent": http["meta"]["traceparent"], "tracestate": "vendor=abc"}, http

    spans = _in_trace(receiver, trace_id, {"SERVER": 2, "CLIENT": 2})
    _no_secret(spans)
    assert {s["service"] for s in spans} == {SERVICE}
    by_id = {s["span_id"]: s for s in spans}
    for name, tool in (("pstd", "pstd__probe"), ("phttp", "phttp__probe")):
        client = by_id[seen[name]]  # the span whose context the upstream received
        assert client["kind"] == "CLIENT" and client["name"] == "tools/call probe", client
        assert client["attributes"]["troupe.server"] == name and client["attributes"]["troupe.outcome"] == "ok"
        assert client["attributes"]["gen_ai.tool.name"] == "probe"
        served = by_id[client["parent_span_id"]]
        assert served["kind"] == "SERVER" and served["name"] == f"tools/call {tool}", served
        assert served["parent_span_id"] == client_span  # the client's own span is troupe's parent
        attributes = served["attributes"]
        assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == tool
        assert attributes["network.transport"] == "tcp" and attributes["troupe.server"] == name
        assert len(attributes["mcp.session.id"]) == 32 and attributes["mcp.protocol.version"] == "2025-11-25"
        assert attributes["troupe.outcome"] == "ok" and attributes["jsonrpc.request.id"].isdigit()
    assert by_id[seen["pstd"]]["attributes"]["network.transport"] == "pipe"
    http_client = by_id[seen["phttp"]]["attributes"]
    assert (http_client["network.transport"], http_client["server.address"], http_client["server.port"]) == \
        ("tcp", "127.0.0.1", port)


def test_the_audit_line_of_a_traced_call_names_its_trace(traced):
    receiver, t, _ = traced
    traceparent, trace_id, _ = _traceparent()
    _probed(Session(t.url).call("pstd__probe", {"secret": SECRET}, {"traceparent": traceparent}))
    audit = t.audit_path

    def line():
        for raw in (audit.read_text() if audit.exists() else "").splitlines():
            record = json.loads(raw)
            if record.get("trace_id") == trace_id:
                return record
        return None
    record = wait_until(line, timeout=10, message="the call's audit line")
    assert (record["server"], record["target"], record["outcome"]) == ("pstd", "probe", "ok")


def test_a_clients_meta_context_wins_over_its_header_and_is_replaced_not_repeated_upstream(traced):
    receiver, t, _ = traced
    session = Session(t.url)
    in_meta, trace_id, client_span = _traceparent()
    in_header, other_trace, _ = _traceparent()
    report = _probed(session.call("pstd__probe", {"secret": SECRET}, {"traceparent": in_header},
                                  meta={"traceparent": in_meta, "tracestate": "a=1"}))
    got_trace, got_parent = _parent_of(report["meta"]["traceparent"])
    assert got_trace == trace_id and got_parent != client_span
    assert report["meta"]["tracestate"] == "a=1"
    assert set(report["meta"]) == {"traceparent", "tracestate"}  # one context, troupe's; nothing else added
    spans = _in_trace(receiver, trace_id, {"SERVER": 1, "CLIENT": 1})
    assert {s["span_id"] for s in spans if s["kind"] == "CLIENT"} == {got_parent}
    assert not [s for s in receiver.all() if s["trace_id"] == other_trace]
    _no_secret(spans)


def test_a_call_without_context_starts_a_trace_of_troupes_own(traced):
    receiver, t, _ = traced
    report = _probed(Session(t.url).call("pstd__probe", {"secret": SECRET}))
    trace_id, parent = _parent_of(report["meta"]["traceparent"])
    spans = _in_trace(receiver, trace_id, {"SERVER": 1, "CLIENT": 1})
    served = next(s for s in spans if s["kind"] == "SERVER")
    assert served["parent_span_id"] == ""  # a root: the client sent no context
    assert next(s for s in spans if s["span_id"] == parent)["parent_span_id"] == served["span_id"]


def test_a_modern_request_carries_its_context_in_meta(traced):
    receiver, t, _ = traced
    traceparent, trace_id, client_span = _traceparent()
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "phttp__probe", "arguments": {"secret": SECRET}, "_meta": {**META, "traceparent": traceparent}}}
    resp = requests.post(t.url, json=body, timeout=30, headers={
        **ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": "phttp__probe"})
    report = _probed(resp.json())
    got_trace, got_parent = _parent_of(report["meta"]["traceparent"])
    assert got_trace == trace_id and report["headers"]["traceparent"] == report["meta"]["traceparent"]
    spans = _in_trace(receiver, trace_id, {"SERVER": 1, "CLIENT": 1})
    served = next(s for s in spans if s["kind"] == "SERVER")
    assert served["parent_span_id"] == client_span
    assert served["attributes"]["mcp.protocol.version"] == MODERN
    assert "mcp.session.id" not in served["attributes"]  # stateless: no session
    assert next(s for s in spans if s["span_id"] == got_parent)["parent_span_id"] == served["span_id"]
    _no_secret(spans)


def test_each_workflow_step_is_an_internal_span_between_the_call_and_its_upstream_request(traced):
    receiver, t, _ = traced
    traceparent, trace_id, client_span = _traceparent()
    answer = Session(t.url).call("workflow_probe_both", {"secret": SECRET}, {"traceparent": traceparent})
    assert "result" in answer and not answer["result"].get("isError"), answer
    spans = _in_trace(receiver, trace_id, {"SERVER": 1, "INTERNAL": 2, "CLIENT": 2})
    _no_secret(spans)
    served = [s for s in spans if s["kind"] == "SERVER"]
    assert [s["name"] for s in served] == ["tools/call workflow_probe_both"]  # the steps' requests are no SERVER span
    assert served[0]["parent_span_id"] == client_span
    steps = {s["attributes"]["troupe.workflow.step"]: s for s in spans if s["kind"] == "INTERNAL"}
    assert set(steps) == {"first", "second"}
    for step_id, server_name in (("first", "pstd"), ("second", "phttp")):
        step = steps[step_id]
        assert step["parent_span_id"] == served[0]["span_id"] and step["attributes"]["troupe.workflow"] == "probe_both"
        upstream = [s for s in spans if s["kind"] == "CLIENT" and s["parent_span_id"] == step["span_id"]]
        assert [s["attributes"]["troupe.server"] for s in upstream] == [server_name]


def test_a_cancelled_call_ends_its_spans_as_cancelled(traced):
    receiver, t, _ = traced
    session = Session(t.url)
    traceparent, trace_id, _ = _traceparent()
    ended: list = []

    def call() -> None:  # request id 2 of this session (initialize was 1)
        ended.append(requests.post(t.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                "params": {"name": "hang__hang", "arguments": {}}},
                                   headers={**session.headers, "traceparent": traceparent}, timeout=30).status_code)
    pending = threading.Thread(target=call, daemon=True)
    pending.start()
    wait_until(lambda: _in_flight(t.base, "hang") == 1, timeout=10, message="the call reached the server")
    assert not [s for s in receiver.all() if s["trace_id"] == trace_id]  # both spans still open
    requests.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": 2, "reason": "the test cancels"}},
                  headers=session.headers, timeout=10).close()
    spans = _in_trace(receiver, trace_id, {"SERVER": 1, "CLIENT": 1})
    assert {s["kind"]: s["attributes"]["troupe.outcome"] for s in spans} == {"SERVER": "cancelled",
                                                                            "CLIENT": "cancelled"}
    pending.join(timeout=5)  # the front still hears of the cancel through the traced sink: its POST ends now
    assert ended == [202], ended


def _in_flight(base: str, name: str) -> int:
    servers = requests.get(base + "/status", timeout=10).json()["servers"]
    return next(s for s in servers if s["name"] == name).get("in_flight") or 0


def test_over_stdio_the_context_comes_in_meta_and_the_server_span_says_pipe(traced, tmp_path):
    receiver, _, _ = traced
    path = write_config(tmp_path, [server("pstd", "tests.servers.trace_probe", pin=False)], mode="flat")
    data = yaml.safe_load(path.read_text())
    data["telemetry"] = {"otlp_endpoint": receiver.url, "service_name": SERVICE}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    t = Troupe(path)
    try:
        t.initialize()
        wait_until(lambda: "pstd__probe" in {tool["name"] for tool in t.request("tools/list")["result"]["tools"]},
                   timeout=30, message="the probe listed")
        traceparent, trace_id, client_span = _traceparent()
        report = _probed(t.request("tools/call", {"name": "pstd__probe", "arguments": {"secret": SECRET},
                                                  "_meta": {"traceparent": traceparent}}))
        got_trace, got_parent = _parent_of(report["meta"]["traceparent"])
        assert got_trace == trace_id and got_parent != client_span
        spans = _in_trace(receiver, trace_id, {"SERVER": 1, "CLIENT": 1})
        served = next(s for s in spans if s["kind"] == "SERVER")
        assert served["parent_span_id"] == client_span and served["attributes"]["network.transport"] == "pipe"
        assert next(s for s in spans if s["span_id"] == got_parent)["parent_span_id"] == served["span_id"]
        _no_secret(spans)
    finally:
        assert t.close() == 0


def _black_hole() -> socket.socket:
    """A collector that takes connections and never answers: every export waits out its timeout."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    return sock


def _dropped(base: str) -> float:
    text = requests.get(base + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "troupe_trace_spans_dropped_total":
                return sample.value
    raise AssertionError("no troupe_trace_spans_dropped_total in /metrics")


def test_calls_go_on_as_fast_while_the_collector_does_not_answer_and_the_lost_spans_are_counted(tmp_path):
    hole = _black_hole()
    endpoint = f"http://127.0.0.1:{hole.getsockname()[1]}"
    t, probe, _ = _start_troupe(tmp_path, endpoint, export_timeout_s=3)
    try:
        wait_until(lambda: _listed(t.url), timeout=30, message="both probes listed")
        session = Session(t.url)
        took = []
        began = time.monotonic()
        # Long enough for the export greenlet to be stuck on the collector (a batch leaves each
        # second and waits 3 s for an answer) while calls go on.
        while time.monotonic() - began < 4.0 or len(took) < 40:
            t0 = time.monotonic()
            _probed(session.call("pstd__probe" if len(took) % 2 else "phttp__probe", {"secret": SECRET}))
            took.append(time.monotonic() - t0)
        assert max(took) < 1.0, f"a call took {max(took):.3f}s while the collector hung"
        assert statistics.median(took) < 0.1, f"p50 {statistics.median(took):.3f}s"
        assert wait_until(lambda: _dropped(t.base) > 0, timeout=20, message="dropped spans counted")
        assert t.stop() == 0  # the stop's flush is bounded: the collector still does not answer
        assert sum(line.startswith("troupe: serving ") for line in t.stderr) == 1, "".join(t.stderr)
    finally:
        if t.proc.poll() is None:
            t.stop()
        stop(probe)
        hole.close()


def test_launching_a_stdio_server_with_tracing_on_runs_nothing_of_troupe_in_the_forked_child():
    """The SDK's BatchSpanProcessor starts a thread in an at-fork hook: under gevent that ran
    troupe's greenlets in the child of every stdio server's launch (it did here, every time)."""
    done = subprocess.run([PYTHON, "-m", "tests.support.fork_check", "20"], cwd=ROOT, capture_output=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == b"forks done", done
    assert b"forked child" not in done.stderr, done.stderr.decode(errors="replace")
