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

What the next hop needs is done on the call path: a span's ids, its times, the context in
_meta. The rest (its name and attributes, its end's marks, its hand-over to the export) is queued
in trace_later.Later and run when the hub is idle, so it costs a call none of its latency; every
change to one span goes through that queue, in order, so none is exported half made.

Attributes follow OpenTelemetry's semantic conventions for MCP (mcp.method.name, gen_ai.tool.name,
gen_ai.prompt.name, mcp.session.id, mcp.protocol.version) and JSON-RPC (jsonrpc.request.id,
rpc.response.status_code, rpc.jsonrpc.error_code, error.type), the network ones, and troupe.*
for what only troupe knows (server, client, profile, outcome). Never an argument or a result value.
"""
from __future__ import annotations

import functools
import hashlib
import os
import time
from typing import Any
from urllib.parse import urlsplit

from loguru import logger
from opentelemetry.trace import SpanKind

from actors.ops import trace_context
from actors.ops.span_ends import CANCELLED, TIMED_OUT, answer_facts, finish, outcome_facts
from actors.ops.spans import SAMPLED, Context, Parent, RecordedSpan, SpanRecorder, parent_in
from actors.ops.trace_later import Later
from actors.ops.otlp_encode import Encoder
from actors.ops.trace_context import TRACED_METHODS
from actors.ops.trace_export import ExportCounts, start_export
from actors.protocol import modern
from actors.redact import redact_url
from actors.workflows.model import INTERNAL_ID

MAX_NAME = 128  # characters of a tool or prompt name kept in a span name or attribute
MEMO = 1024  # session ids hashed, HTTP upstreams' addresses parsed: each done once, not per call
PIPE = (("network.transport", "pipe"),)
_NO_VERSION = object()  # a request whose _meta names no protocol version: a session's


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
        self.later = Later()  # the spans' work that waits for an idle hub (see the module's docstring)
        # how troupe's clients reach it: its front is stdio (a pipe) or HTTP (TCP) for every Session
        self._network = {"network.transport": "pipe"} if serve_transport == "stdio" else \
            {"network.transport": "tcp", "network.protocol.name": "http"}

    # ---------------------------------------------------------------- the Session: client requests

    def served(self, session, rid, method: str, params: dict, sink):
        """Session._request's hook: the sink to answer request `rid` through, carrying the
        request's SERVER span (a traced method) and its parent context (the client's, from _meta,
        where the HTTP front has put its headers too). A workflow's own step request gets no
        SERVER span: its runner's step span is its parent. A request handled again (start-up
        settled) keeps the sink it has. Only the span's ids and start are taken now; its record
        is made when it ends, off the call path."""
        if method not in TRACED_METHODS or traced_of(sink) is not None:
            return sink
        meta = params.get("_meta") if type(params) is dict else None
        parent = parent_in(meta)  # None: troupe's span starts the trace
        request = RequestTrace(sink, rid, parent, self.later)
        if isinstance(rid, str) and rid.startswith(INTERNAL_ID):
            return request  # a workflow step's request: the step's span is its context
        request.trace_id, request.span_id, request.flags, request.tracestate = self.recorder.child_ids(parent)
        if request.flags & SAMPLED:  # an unsampled span is never made: nothing to read for it
            request.trace_open = True
            # what its attributes are made of, read now: the params and the session go on changing
            view = session.view
            version = meta.get(modern.META_VERSION, _NO_VERSION) if type(meta) is dict else _NO_VERSION
            request.trace_facts = (self, method, _target(params), version,
                                   session.key if version is _NO_VERSION else None,
                                   session.handshake.protocol_version if version is _NO_VERSION else None,
                                   view.client_name, view.profile)
        return request

    def served_span(self, request: RequestTrace, facts: tuple, end_ns: int) -> None:
        """A SERVER span made and ended, as `request` and its answer's `facts` say (Later's job)."""
        _, method, target, version, session_key, session_version, client, profile = request.trace_facts
        name, attributes = _request_attributes(method, *target)
        attributes["jsonrpc.request.id"] = str(request.trace_rid)
        attributes.update(self._network)
        if version is _NO_VERSION:  # a session: its id, hashed (the HTTP session id is a credential of its client)
            attributes["mcp.session.id"] = _session_id(session_key)
            attributes["mcp.protocol.version"] = session_version
        elif isinstance(version, str):  # a modern request: its version from its _meta
            attributes["mcp.protocol.version"] = version
        if client:
            attributes["troupe.client"] = client
        if profile is not None:
            attributes["troupe.profile"] = profile.name
        if request.trace_server is not None:
            attributes["troupe.server"] = request.trace_server
        span = RecordedSpan(self.recorder, name, SpanKind.SERVER, request.trace_id, request.span_id,
                            request.trace_parent, request.flags, request.tracestate, attributes,
                            request.trace_start)
        span.events.extend(request.trace_events)
        finish(span, facts, end_ns)

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
        context = request.trace_context()
        trace_id, span_id, flags, state = self.recorder.child_ids(context)
        if flags & SAMPLED:
            call.span = UpstreamSpan(self, context, trace_id, span_id, flags, state,
                                     (call.method, _target(call.params), call.server, server))
            if request.span_id:
                request.trace_server = call.server
                if request.trace_sent > 1:
                    request.trace_events.append(
                        ("troupe.retry", {"troupe.attempt": request.trace_sent, "troupe.server": call.server,
                                          "troupe.reason": "the server restarted under the call"}, time.time_ns()))
        return trace_context.with_traceparent(call.params, f"00-{trace_id:032x}-{span_id:016x}-{flags:02x}", state)

    def upstream_span(self, upstream: UpstreamSpan, facts: tuple, end_ns: int) -> None:
        """A CLIENT span made and ended, as `upstream` and its outcome's `facts` say (Later's job)."""
        method, target, server, entry = upstream.facts
        name, attributes = _request_attributes(method, *target)
        attributes["troupe.server"] = server
        attributes.update(_upstream_network(entry))
        span = RecordedSpan(self.recorder, name, SpanKind.CLIENT, upstream.trace_id, upstream.span_id,
                            upstream.parent, upstream.flags, upstream.tracestate, attributes, upstream.start_ns)
        finish(span, facts, end_ns)

    def trace_of(self, sink) -> int | None:
        """The trace id of the traced request answering through `sink`, for its audit line (an
        int: the line writes it as 32 hex digits, off the call path)."""
        request = traced_of(sink)
        if request is None:
            return None
        context = request.trace_context()  # its trace is its span's or its parent's
        return context.trace_id if context is not None else None

    # ---------------------------------------------------------------- a workflow run

    def steps(self, sink, workflow: str) -> StepSpans | None:
        """The step spans of a workflow run answering through `sink` (None: not a traced request)."""
        request = traced_of(sink)
        return StepSpans(self.recorder, request.trace_context(), workflow, self.later) if request is not None \
            else None

    # ---------------------------------------------------------------- edge

    def report(self) -> dict:
        """The export's figures for the status report and /metrics (no URL: it may carry a token)."""
        return self.counts.snapshot(self.processor.queued())

    def stop(self, timeout_s: float) -> None:
        """Flush what is queued, waiting `timeout_s` at most (a collector that is down costs its
        spans, never troupe's stop), then end the export."""
        self.later.stop()  # the spans still waiting to be filled and ended first
        self.processor.shutdown(timeout_millis=int(timeout_s * 1000))


class RequestTrace:
    """The sink a traced client request is answered through: the front's own sink, wrapped. It
    holds the request's SERVER span until it ends (its ids and start, `trace_facts` for its
    attributes; no span of its own for a workflow's step, whose parent is its runner's span) and
    is the context its upstream spans hang from (trace_id, span_id, flags, tracestate, remote:
    spans.Context). Its span's record is made and ended, off the call path, when the request's one
    answer passes through it. Everything else reads through to the front's sink (`withdrawn`,
    `principal`…): this wrapper's own names are the context's and start with `trace_`, so none
    hides one of the front's. Made by its request's Session; ended by whoever gives the request its
    one answer (the Session, or the TaskKeeper for a task) or by the Session withdrawing it,
    whichever is first (`trace_open`: once)."""

    __slots__ = ("_inner", "trace_rid", "trace_parent", "trace_id", "span_id", "flags", "tracestate", "trace_start",
                 "trace_sent", "trace_open", "trace_facts", "trace_server", "trace_events", "_later")
    remote = False  # as a parent: one of troupe's own spans

    def __init__(self, inner, rid, parent: Parent | None, later: Later) -> None:
        self._inner, self.trace_rid, self.trace_parent, self._later = inner, rid, parent, later
        self.trace_id = self.span_id = self.flags = 0  # no span of its own (yet)
        self.tracestate = ""
        self.trace_start = time.time_ns()
        self.trace_sent = 0  # upstream sends of this request (a second one is a retry)
        self.trace_open = False  # a sampled span not ended yet
        self.trace_facts: tuple = ()
        self.trace_server: str | None = None  # the server its last upstream request went to
        self.trace_events: list = []

    def __call__(self, message) -> None:
        if self.trace_open and type(message) is dict and "method" not in message \
                and message.get("id") == self.trace_rid:
            self.trace_open = False
            try:  # what the end says is read now (the message may change once sent); the span is made later
                self._later.add(self.trace_facts[0].served_span, self, answer_facts(message), time.time_ns())
            except Exception:  # a span that cannot end must not cost the request its answer
                logger.exception("tracing: ending a request's span failed")
        self._inner(message)

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def trace_context(self) -> RequestTrace | Parent | None:
        """The parent of this request's upstream and step spans: its own span's context, or (a
        workflow step's request) the step span's."""
        return self if self.span_id else self.trace_parent

    def trace_withdrawn(self) -> None:
        """The Session withdrew the request: no answer will pass, its span ends as cancelled."""
        if self.trace_open:
            self.trace_open = False
            self._later.add(self.trace_facts[0].served_span, self, CANCELLED, time.time_ns())


class UpstreamSpan:
    """One upstream request's sampled CLIENT span, held by its Call in the Session's CallTable
    until it ends: its ids, start and what its attributes are made of (`facts`). `end` ends it
    once, whichever way the call ends first (later calls do nothing); its record is made then,
    off the call path."""

    __slots__ = ("_tracing", "parent", "trace_id", "span_id", "flags", "tracestate", "facts", "start_ns", "_open")

    def __init__(self, tracing: Tracing, parent, trace_id: int, span_id: int, flags: int, tracestate: str,
                 facts: tuple) -> None:
        self._tracing, self.parent, self.trace_id, self.span_id = tracing, parent, trace_id, span_id
        self.flags, self.tracestate, self.facts = flags, tracestate, facts
        self.start_ns = time.time_ns()
        self._open = True

    def end(self, outcome) -> None:
        """`outcome`: the upstream's result, an UpstreamError, or why troupe stopped waiting (a str).
        Never raises: the call path ends it just before the call's answer goes out."""
        if not self._open:
            return
        self._open = False
        try:
            self._tracing.later.add(self._tracing.upstream_span, self, outcome_facts(outcome), time.time_ns())
        except Exception:
            logger.exception("tracing: ending an upstream span failed")


class StepSpans:
    """The INTERNAL spans of one workflow run's steps, by the step request's id: owned by the
    run's greenlet (workflows/runner.py), each ended once when its step is answered, times out,
    or the run is cancelled or fails. Their ends go through the Tracing's Later queue, as every
    span's do, so spans reach the export in the order they ended."""

    def __init__(self, recorder: SpanRecorder, parent: Context | None, workflow: str,
                 later: Later) -> None:
        self._recorder, self._parent, self._workflow, self._later = recorder, parent, workflow, later
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
        facts = answer_facts(answer) if reason is None else TIMED_OUT if "deadline" in reason else CANCELLED
        self._later.add(finish, span, facts, time.time_ns())


def traced_of(sink) -> RequestTrace | None:
    """The RequestTrace under `sink` (a modern request's ModernSink wraps it), or None."""
    for _ in range(4):  # a handled-again modern request may be wrapped twice
        if type(sink) is RequestTrace:
            return sink
        if not isinstance(sink, modern.ModernSink):
            return None
        sink = sink.sink
    return None


def _target(params: Any) -> tuple:
    """(tool or prompt name, resource URI) of a request's params, as strings or None: what its
    span's name and attributes are made of, read on the call path (cheap), used later."""
    if type(params) is not dict:
        return None, None
    name, uri = params.get("name"), params.get("uri")
    return name if isinstance(name, str) else None, uri if isinstance(uri, str) else None


def _request_attributes(method: str, name: str | None, uri: str | None) -> tuple[str, dict]:
    """(span name, attributes) of an MCP request: `{method} {target}` with the tool or prompt
    name as target (never a resource URI in the name: too many distinct names)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    name = name[:MAX_NAME] if name else None
    if method == "tools/call" and name:
        attributes["gen_ai.tool.name"] = name
        attributes["gen_ai.operation.name"] = "execute_tool"
        return f"{method} {name}", attributes
    if method == "prompts/get" and name:
        attributes["gen_ai.prompt.name"] = name
        return f"{method} {name}", attributes
    if method == "resources/read" and uri is not None:
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
