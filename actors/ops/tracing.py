"""OpenTelemetry spans across troupe: a SERVER span per client request, a CLIENT span per upstream
request, an INTERNAL span per workflow step, and the W3C context that links them to the client
before troupe and the servers after it.

Loaded only when tracing is on (trace_wiring imports it then): this is the one module of troupe's
call path that imports opentelemetry. Every span has one owner, the greenlet of the actor whose
table holds what the span measures, and is ended exactly once by it:

  SERVER    the client request's Session, through the request's sink (RequestTrace): ended when
            the request's one answer passes through it, or when the Session withdraws the call
            (a cancel, the client's leaving), the only ways a request ends unanswered.
  CLIENT    the same Session, on the forwarded call in its CallTable (Call.span, UpstreamSpan):
            ended when the Connection's answer settles the call, when the Session's deadline
            answers it, or when the call leaves the table any other way (cancelled, failed, the
            client gone). The Connection never holds it: a Connection that dies, or drops a tell,
            cannot leave a span open, since the caller's deadline still ends the call.
  INTERNAL  a workflow run's greenlet (StepSpans): ended when its step is answered, times out
            or is cancelled with the run.

Attributes follow OpenTelemetry's semantic conventions for MCP (mcp.method.name, gen_ai.tool.name,
gen_ai.prompt.name, mcp.session.id, mcp.protocol.version) and JSON-RPC (jsonrpc.request.id,
rpc.response.status_code, rpc.jsonrpc.error_code, error.type), the network ones, and troupe.*
for what only troupe knows (server, client, profile, outcome). Never an argument or a result value.
"""
from __future__ import annotations

import functools
import hashlib
import os
from typing import Any
from urllib.parse import urlsplit

from loguru import logger
from opentelemetry.trace import SpanKind

from actors.messages import UpstreamError
from actors.ops import trace_context
from actors.ops.spans import Parent, RecordedSpan, SpanRecorder, parent_in
from actors.ops.otlp_encode import Encoder
from actors.ops.trace_context import TRACED_METHODS
from actors.ops.trace_export import ExportCounts, start_export
from actors.protocol import modern
from actors.redact import redact_url
from actors.workflows.runner import INTERNAL_ID

MAX_NAME = 128  # characters of a tool or prompt name kept in a span name or attribute
MEMO = 1024  # session ids hashed, HTTP upstreams' addresses parsed: each done once, not per call
PIPE = (("network.transport", "pipe"),)
CACHE_META = "troupe/cache"  # a cached answer's _meta mark (actors/caching/session_side.py)


class Tracing:
    """troupe's tracer: its span recorder (actors/ops/spans.py: never the process-global
    provider, so a host app embedding troupe keeps its own), the batch export (trace_export) and
    the counters /metrics reads. Shared by every Session through its context; it keeps no per-call
    state, so nothing here is written by two actors: spans live with their owners (see the
    module's docstring)."""

    def __init__(self, url: str, service_name: str, export_timeout_s: float, serve_transport: str) -> None:
        self.url = url
        self.counts = ExportCounts()
        self.recorder = SpanRecorder(service_name, os.environ)
        resource, scope = self.recorder.resource, self.recorder.scope
        self.encoder = Encoder(resource.attributes, resource.schema_url, scope.name, scope.version or "")
        self.processor = start_export(url, export_timeout_s, self.counts, self.encoder)
        self.recorder.add_processor(self.processor)
        # how troupe's clients reach it: its front is stdio (a pipe) or HTTP (TCP) for every Session
        self._network = {"network.transport": "pipe"} if serve_transport == "stdio" else \
            {"network.transport": "tcp", "network.protocol.name": "http"}

    # ---------------------------------------------------------------- the Session: client requests

    def served(self, session, rid, method: str, params: dict, sink):
        """Session._request's hook: the sink to answer request `rid` through, carrying the
        request's SERVER span (a traced method) and its parent context (the client's, from _meta,
        where the HTTP front has put its headers too). A workflow's own step request gets no
        SERVER span: its runner's step span is its parent. A request handled again (start-up
        settled) keeps the sink it has."""
        if method not in TRACED_METHODS or traced_of(sink) is not None:
            return sink
        meta = params.get("_meta") if isinstance(params, dict) else None
        parent = parent_in(meta)  # None: troupe's span starts the trace
        if isinstance(rid, str) and rid.startswith(INTERNAL_ID):
            return RequestTrace(sink, rid, None, parent)
        name, attributes = _request_attributes(method, params)
        attributes["jsonrpc.request.id"] = str(rid)
        attributes.update(self._network)
        if isinstance(meta, dict) and modern.META_VERSION in meta:  # modern.is_modern, its _meta at hand
            version = meta.get(modern.META_VERSION)
            if isinstance(version, str):
                attributes["mcp.protocol.version"] = version
        else:  # a session: its id, hashed (the HTTP session id is a credential of its client)
            attributes["mcp.session.id"] = _session_id(session.key)
            attributes["mcp.protocol.version"] = session.handshake.protocol_version
        view = session.view
        if view.client_name:
            attributes["troupe.client"] = view.client_name
        if view.profile is not None:
            attributes["troupe.profile"] = view.profile.name
        return RequestTrace(sink, rid, self.recorder.start(name, SpanKind.SERVER, parent, attributes), None)

    def withdrawn(self, sink, reason: str) -> None:
        """Forwarder's hook: the Session withdrew this request's call; no answer will pass its sink."""
        request = traced_of(sink)
        if request is not None:
            request.trace_withdrawn()

    # ---------------------------------------------------------------- the Session: upstream requests

    def sending(self, call, server) -> Any:
        """Forwarder.send's hook: the params to send `call` upstream with. Within a traced request
        it opens the call's CLIENT span (Call.span), child of the request's span, and puts that
        span's context in the params' _meta (the client's own traceparent replaced, not added to);
        an HTTP transport mirrors it in the headers (trace_context.headers_of). A second send of
        the same request (its server came back after a restart) is a retry: an event on it."""
        request = traced_of(call.sink)
        if request is None:
            return call.params
        request.trace_sent += 1
        served = request.trace_span
        if served is not None:
            served.set_attribute("troupe.server", call.server)
            if request.trace_sent > 1:
                served.add_event("troupe.retry", {"troupe.attempt": request.trace_sent, "troupe.server": call.server,
                                                  "troupe.reason": "the server restarted under the call"})
        name, attributes = _request_attributes(call.method, call.params)
        attributes["troupe.server"] = call.server
        attributes.update(_upstream_network(server))
        span = self.recorder.start(name, SpanKind.CLIENT, request.trace_context(), attributes)
        call.span = UpstreamSpan(span)
        return trace_context.with_context(call.params, span.carrier())

    def trace_id_of(self, sink) -> str | None:
        """The trace (32 hex digits) of the traced request answering through `sink`, for its audit line."""
        request = traced_of(sink)
        if request is None:
            return None
        span = request.trace_span
        context = span if span is not None else request.trace_parent  # its trace is its span's or its parent's
        return f"{context.trace_id:032x}" if context is not None else None

    # ---------------------------------------------------------------- a workflow run

    def steps(self, sink, workflow: str) -> StepSpans | None:
        """The step spans of a workflow run answering through `sink` (None: not a traced request)."""
        request = traced_of(sink)
        return StepSpans(self.recorder, request.trace_context(), workflow) if request is not None else None

    # ---------------------------------------------------------------- edge

    def report(self) -> dict:
        """The export's figures for the status report and /metrics (no URL: it may carry a token)."""
        return self.counts.snapshot(self.processor.queued())

    def stop(self, timeout_s: float) -> None:
        """Flush what is queued, waiting `timeout_s` at most (a collector that is down costs its
        spans, never troupe's stop), then end the export."""
        self.processor.shutdown(timeout_millis=int(timeout_s * 1000))


class RequestTrace:
    """The sink a traced client request is answered through: the front's own sink, wrapped. It
    ends the request's SERVER span (`trace_span`; None for a workflow's step, whose parent is its
    runner's span) as the request's one answer passes, and holds what the request's upstream
    spans hang from. Everything else reads through to the front's sink (`withdrawn`,
    `principal`…): this wrapper's own names all start with `trace_`, so none hides one of the
    front's. Made by its request's Session; ended by whoever gives the request its one answer (the
    Session, or the TaskKeeper for a task) or by the Session withdrawing it, whichever is first: the
    span itself ends once whoever asks (RecordedSpan.end), `_open` only spares it the call."""

    __slots__ = ("_inner", "_rid", "trace_span", "trace_parent", "trace_sent", "_open")

    def __init__(self, inner, rid, span: RecordedSpan | None, parent: Parent | None) -> None:
        self._inner, self._rid, self.trace_span, self.trace_parent = inner, rid, span, parent
        self.trace_sent = 0  # upstream sends of this request (a second one is a retry)
        self._open = span is not None

    def __call__(self, message) -> None:
        if self._open and type(message) is dict and "method" not in message and message.get("id") == self._rid:
            self._open = False
            try:
                _end_answered(self.trace_span, message)
            except Exception:  # a span that cannot end must not cost the request its answer
                logger.exception("tracing: ending a request's span failed")
        self._inner(message)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def trace_context(self) -> Parent | None:
        """The parent of this request's upstream and step spans."""
        return self.trace_span.parent_context() if self.trace_span is not None else self.trace_parent

    def trace_withdrawn(self) -> None:
        """The Session withdrew the request: no answer will pass, its span ends as cancelled."""
        if self._open and self.trace_span is not None:
            self._open = False
            self.trace_span.set_attribute("troupe.outcome", "cancelled")
            self.trace_span.end()


class UpstreamSpan:
    """One upstream request's CLIENT span, held by its Call in the Session's CallTable: `end`
    ends it once, whichever way the call ends first; later calls do nothing."""

    __slots__ = ("_span",)

    def __init__(self, span: RecordedSpan) -> None:
        self._span: RecordedSpan | None = span

    def end(self, outcome) -> None:
        """`outcome`: the upstream's result, an UpstreamError, or why troupe stopped waiting (a str).
        Never raises: the call path ends it just before the call's answer goes out."""
        span, self._span = self._span, None
        if span is None:
            return
        try:
            self._end(span, outcome)
        except Exception:
            logger.exception("tracing: ending an upstream span failed")

    @staticmethod
    def _end(span: RecordedSpan, outcome) -> None:
        if isinstance(outcome, str):
            span.set_attribute("troupe.outcome", "cancelled")
        elif isinstance(outcome, UpstreamError):
            if outcome.link_lost:
                span.add_event("troupe.upstream.lost", {"troupe.server": outcome.server or ""})
            _mark_error(span, outcome.code)
        else:
            _mark_result(span, outcome)
        span.end()


class StepSpans:
    """The INTERNAL spans of one workflow run's steps, by the step request's id: owned by the
    run's greenlet (workflows/runner.py), each ended once when its step is answered, times out,
    or the run is cancelled or fails."""

    def __init__(self, recorder: SpanRecorder, parent: Parent | None, workflow: str) -> None:
        self._recorder, self._parent, self._workflow = recorder, parent, workflow
        self._open: dict[str, RecordedSpan] = {}

    def started(self, rid: str, step, params: dict) -> dict:
        """Open step `step`'s span; the params of its request, carrying the span's context."""
        span = self._recorder.start(f"workflow step {step.id}", SpanKind.INTERNAL, self._parent,
                                    {"troupe.workflow": self._workflow, "troupe.workflow.step": step.id,
                                     "gen_ai.tool.name": step.tool[:MAX_NAME]})
        self._open[rid] = span
        return trace_context.with_context(params, span.carrier())

    def ended(self, rid: str, answer: Any = None, reason: str | None = None) -> None:
        """Step request `rid` was answered (`answer`), or troupe stopped waiting for it (`reason`)."""
        span = self._open.pop(rid, None)
        if span is None:
            return
        if reason is not None:
            span.set_attribute("troupe.outcome", "cancelled" if "deadline" not in reason else "timeout")
            if "deadline" in reason:
                span.set_attribute("error.type", "timeout")
                span.set_error()
            span.end()
            return
        _end_answered(span, answer)


def traced_of(sink) -> RequestTrace | None:
    """The RequestTrace under `sink` (a modern request's ModernSink wraps it), or None."""
    for _ in range(4):  # a handled-again modern request may be wrapped twice
        if type(sink) is RequestTrace:
            return sink
        if not isinstance(sink, modern.ModernSink):
            return None
        sink = sink.sink
    return None


def _request_attributes(method: str, params: Any) -> tuple[str, dict]:
    """(span name, attributes) of an MCP request: `{method} {target}` with the tool or prompt
    name as target (never a resource URI in the name: too many distinct names)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    name = params.get("name") if isinstance(params, dict) else None
    name = name[:MAX_NAME] if isinstance(name, str) else None
    if method == "tools/call" and name:
        attributes["gen_ai.tool.name"] = name
        attributes["gen_ai.operation.name"] = "execute_tool"
        return f"{method} {name}", attributes
    if method == "prompts/get" and name:
        attributes["gen_ai.prompt.name"] = name
        return f"{method} {name}", attributes
    uri = params.get("uri") if isinstance(params, dict) else None
    if method == "resources/read" and isinstance(uri, str):
        # as troupe shows every URL: a password, query values and the fragment replaced (they may be secrets)
        attributes["mcp.resource.uri"] = redact_url(uri)[:1024]
    return method, attributes


@functools.lru_cache(maxsize=MEMO)  # lru_cache is thread-safe: a memo any Session may fill
def _session_id(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def _upstream_network(server) -> tuple:
    """Where an upstream request goes (`server`: its entry in the Supervisor's directory): a pipe
    to a child, or TCP to an HTTP server (host and port); (key, value) pairs."""
    http = getattr(getattr(server, "config", None), "http", None)
    return PIPE if http is None else _http_network(http.url)


@functools.lru_cache(maxsize=MEMO)
def _http_network(url: str) -> tuple:
    parts = urlsplit(url)
    out: dict[str, Any] = {"network.transport": "tcp", "network.protocol.name": "http"}
    if parts.hostname:
        out["server.address"] = parts.hostname
        try:
            out["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # a malformed port in a URL troupe could not connect to anyway
            pass
    return tuple(out.items())


def _end_answered(span: RecordedSpan | None, message: Any) -> None:
    """End a span with the JSON-RPC answer it measured: an error's code, a tool's isError, a round
    asking for input, a cache hit. Only codes and marks: no message text (it may quote arguments)."""
    if span is None:
        return
    if type(message) is dict and "error" in message:
        error = message.get("error")
        _mark_error(span, error.get("code") if type(error) is dict else None)
    else:
        result = message.get("result") if type(message) is dict else None
        if type(result) is dict:
            meta = result.get("_meta")
            mark = meta.get(CACHE_META) if type(meta) is dict else None
            if type(mark) is dict and mark.get("hit") is True:
                age = mark.get("age_s")
                span.add_event("troupe.cache.hit", {"troupe.cache.age_s": float(age)}
                               if isinstance(age, (int, float)) and not isinstance(age, bool) else {})
        _mark_result(span, result)
    span.end()


def _mark_result(span: RecordedSpan, result: Any) -> None:
    if type(result) is dict and result.get("isError") is True:
        span.set_attribute("error.type", "tool_error")
        span.set_attribute("troupe.outcome", "tool_error")
        span.set_error()
    elif modern.input_required(result):
        span.set_attribute("troupe.outcome", "input_required")
    else:
        span.set_attribute("troupe.outcome", "ok")


def _mark_error(span: RecordedSpan, code: Any) -> None:
    if isinstance(code, int) and not isinstance(code, bool):
        span.set_attribute("rpc.response.status_code", str(code))
        span.set_attribute("rpc.jsonrpc.error_code", code)
        span.set_attribute("error.type", str(code))
    else:
        span.set_attribute("error.type", "_OTHER")
    span.set_attribute("troupe.outcome", "error")
    span.set_error()
