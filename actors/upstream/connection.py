"""Connection actor: the client side of MCP for one upstream server."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import gevent
import pykka
from loguru import logger

from actors.settings.config import ServerConfig
from actors.events.kinds import ResourceUpdated, ServerLogged
from actors.messages import (
    AnswerServer,
    CancelForward,
    ConnectionDegraded,
    ConnectionFailed,
    Forward,
    Inbound,
    NotifyUpstream,
    QueuedTimedOut,
    RequestTimedOut,
    ServerRequest,
    ServerRequestCancelled,
    SetLogLevel,
    TransportClosed,
    UpstreamError,
    GetStats,
    ConnectionRetired,
)
from actors.upstream.listing import Listing
from actors.upstream.subscriptions import UpstreamSubscriptions
from actors.supervision.policy import HUNG_AFTER_TIMEOUTS
from actors.protocol import jsonrpc, mcp
from actors.upstream.stats import LogBudget, ServerStats
from actors.transports.base import Transport, TransportError, TransportGarbage

INIT_TIMEOUT = 30.0  # the handshake, bounded separately from the per-call timeout
DEGRADED_AFTER_TIMEOUTS = 3  # consecutive timeouts before the server shows as degraded
PING_TIMEOUT = 5.0  # the liveness ping after `hung_after` timeouts in a row (at most the server's timeout)
ID_PREVIEW_CHARS = 60  # how much of an unusable id a log line quotes
CLIENT_ANSWER_TIMEOUT = 300.0  # a relayed sampling/elicitation request waits this long for a person
MIN_SEND_WINDOW = 0.1  # a queued call that gets its slot with less time left than this is answered, not sent
# Server→client requests troupe relays, and the client capability each needs.
RELAYED = mcp.RELAYED_REQUESTS


def make_transport(config: ServerConfig, on_message, on_closed) -> Transport:
    """The transport a server's config asks for (imported lazily: HTTP pulls in requests)."""
    if config.transport == "stdio":
        from actors.transports.stdio import StdioTransport
        assert config.stdio is not None  # config.py gives every stdio server its StdioSpec
        return StdioTransport(config.name, config.stdio, on_message, on_closed,
                              max_message_bytes=config.max_message_bytes, write_timeout=config.timeout)
    if config.transport == "sse":
        from actors.transports.legacy_sse import SseTransport
        assert config.http is not None  # config.py gives every HTTP server its HttpSpec
        return SseTransport(config.name, config.http.url, config.http.headers, on_message, on_closed)
    from actors.transports.streamable_http import StreamableHttpTransport
    assert config.http is not None
    return StreamableHttpTransport(config.name, config.http.url, config.http.headers, on_message, on_closed)


@dataclass(slots=True)
class _Pending:
    """One request this Connection sent upstream and still awaits: how to answer it, its timer,
    and for a client's call (`counted`) its progress relay and the calling session and request id."""

    method: str
    on_reply: Callable[[Any], None]
    timer: gevent.Greenlet | None
    started: float
    timeout: float
    counted: bool = False  # a client call (stats, in-flight) rather than troupe's own request
    on_progress: Callable[[dict], None] | None = None
    origin: Any = None
    origin_request: Any = None


class Connection(Listing, pykka.ThreadingActor):
    """Owns one upstream server's transport, its requests in flight (each with a timer), the
    calls queued beyond max_in_flight, the server's requests it relays to clients, the resource
    subscriptions and its lists (see Listing).

    Receives Forward (answered through its on_reply), CancelForward, AnswerServer, SetLogLevel
    and NotifyUpstream; from its own greenlets Inbound, TransportClosed, RequestTimedOut and
    QueuedTimedOut. Sends PublishServer to the Registry; ConnectionReady, ConnectionCounts,
    ConnectionDegraded and ConnectionFailed to the Supervisor; ServerRequest (through the
    router) and ServerRequestCancelled to the calling Session; ServerLogged and
    ResourceUpdated to the bus.
    """

    def __init__(self, config: ServerConfig, generation: int, supervisor: pykka.ActorRef,
                 registry: pykka.ActorRef, *,
                 transport_factory: Callable[..., Transport] = make_transport, client_capabilities: dict | None = None,
                 bus=None, route_server_request=None, log_level: str | None = None,
                 hung_after: int = HUNG_AFTER_TIMEOUTS) -> None:
        super().__init__()
        self.config, self.generation = config, generation
        self.supervisor, self.registry = supervisor, registry
        self.stats = ServerStats()  # this generation's own; others ask GetStats for a snapshot
        self.log = logger.bind(server=config.name)
        self._factory = transport_factory
        self._client_caps = client_capabilities or {}
        self.bus = bus
        # How a server→client request finds the session whose call triggered it (None: refuse them).
        self._route = route_server_request
        self.log_level = log_level  # the level upstreams log at, as the Supervisor last told
        self.transport = None
        self._next_id = 0
        self._pending: dict[int, _Pending] = {}
        self._queued: dict[int, tuple] = {}  # ticket → (Forward, timer, timeout, since), oldest first
        self.subscriptions = UpstreamSubscriptions(
            lambda method, params, on_reply: self._request(method, params, on_reply, timeout=self.config.timeout))
        self._next_ticket = 0
        self._relayed: dict[Any, tuple] = {}  # upstream request id → (timer, session ref)
        self._lists: dict[str, tuple] = {}
        self._listing: set[str] = set()
        self._ready = False
        self._failed = False
        self._timeouts_in_a_row = 0
        self._hung_after = hung_after  # timeouts in a row before a ping decides whether it is hung
        self._probing = False  # a liveness ping is out
        self._log_budget = LogBudget()  # log lines about what the server sent that troupe dropped
        self.capabilities: dict = {}
        self.server_info: dict = {}
        self.protocol_version = mcp.LATEST

    # ---------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        # on_start failures never reach on_failure: everything is caught and reported.
        try:
            self.transport = self._factory(self.config, self._from_transport, self._transport_closed)
            self.transport.open()
        except TransportError as exc:
            self._fail(str(exc))
            return
        except Exception as exc:  # a bug in a transport must not kill the actor system
            self.log.exception("transport open failed")
            self._fail(f"transport open failed: {exc}")
            return
        # What troupe can relay for its clients (see Runtime.upstream_capabilities).
        caps = self._client_caps
        self._request("initialize", {"protocolVersion": mcp.LATEST, "capabilities": caps,
                                     "clientInfo": mcp.CLIENT_INFO},
                      self._initialized, timeout=min(INIT_TIMEOUT, max(self.config.timeout, 5.0)))

    def on_stop(self) -> None:
        self._fail_all(f"{self.config.name}: connection stopped")
        try:  # its totals outlive it: the supervisor adds them to the server's
            self.supervisor.tell(ConnectionRetired(self.config.name, self.generation, self.stats.snapshot()))
        except pykka.ActorDeadError:
            pass
        if self.transport is not None:
            try:
                self.transport.close()
            except Exception:
                self.log.exception("transport close failed")

    def on_failure(self, exc_type, exc_value, traceback) -> None:
        # A bug while handling a message stops this actor without on_stop: fail every
        # pending call, close the transport, and tell the supervisor so it restarts the server.
        if not self._failed:
            self._fail(f"troupe internal error: {exc_type.__name__}: {exc_value}")
        self.on_stop()

    def describe(self) -> dict:
        return self.transport.describe() if self.transport is not None else {}

    def _tell(self, message) -> None:
        try:
            self.actor_ref.tell(message)
        except pykka.ActorDeadError:
            pass  # late news for a stopped connection: nobody is waiting for it

    def _from_transport(self, message) -> None:
        self._tell(Inbound(message))

    def _transport_closed(self, reason: str) -> None:
        self._tell(TransportClosed(reason))

    # ---------------------------------------------------------------- dispatch

    def on_receive(self, message):
        match message:
            case Forward():
                self._forward(message)
            case Inbound(message=msg):
                self._inbound(msg)
            case GetStats(reply=reply):
                reply.set(self.stats.snapshot())
            case RequestTimedOut(request_id=rid):
                self._timed_out(rid)
            case QueuedTimedOut(ticket=ticket):
                self._queue_timed_out(ticket)
            case CancelForward():
                self._cancel(message)
            case AnswerServer(upstream_id=uid, outcome=outcome):
                self._answer_server(uid, outcome)
            case SetLogLevel(level=level):
                self.log_level = level
                self._set_log_level(level)
            case NotifyUpstream(method=method, params=params):
                self._send(jsonrpc.notification(method, params))
            case TransportClosed(reason=reason):
                self._fail(reason)
            case _:
                self.log.warning("connection: unknown message {!r}", message)

    # ---------------------------------------------------------------- requests

    def _forward(self, fwd: Forward) -> None:
        if not self._ready:
            fwd.on_reply(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {self.config.name} is not ready",
                                       server=self.config.name))
            return
        if self.subscriptions.handles(fwd.method):
            self.subscriptions.request(fwd.method, fwd.params, fwd.origin, fwd.on_reply)
            return
        if self.stats.in_flight >= self.config.max_in_flight:
            self._wait_for_slot(fwd)
            return
        self._dispatch(fwd)

    # Backpressure: beyond max_in_flight a call waits its turn (FIFO), still bounded by its
    # own timeout; only a full queue is refused as busy.

    def _wait_for_slot(self, fwd: Forward) -> None:
        if len(self._queued) >= self.config.max_queued:
            fwd.on_reply(UpstreamError(jsonrpc.SERVER_UNAVAILABLE,
                                       f"server {self.config.name} is busy: {self.stats.in_flight} calls in "
                                       f"flight and {len(self._queued)} waiting (max_queued "
                                       f"{self.config.max_queued}); retry later", server=self.config.name))
            return
        self._next_ticket += 1
        ticket = self._next_ticket
        timeout = fwd.timeout or self.config.timeout
        timer = gevent.spawn_later(timeout, self._tell, QueuedTimedOut(ticket))
        self._queued[ticket] = (fwd, timer, timeout, time.monotonic())
        self.stats.queued = len(self._queued)

    def _queue_timed_out(self, ticket: int) -> None:
        entry = self._queued.pop(ticket, None)
        if entry is None:
            return
        self.stats.queued = len(self._queued)
        fwd, _, timeout, _ = entry
        self._answer_no_slot(fwd, timeout)

    def _answer_no_slot(self, fwd: Forward, timeout: float) -> None:
        fwd.on_reply(UpstreamError(jsonrpc.REQUEST_TIMEOUT,
                                   f"server {self.config.name} had no free slot within {timeout:g}s "
                                   f"({self.stats.in_flight} calls in flight, max_in_flight "
                                   f"{self.config.max_in_flight})", server=self.config.name))

    def _next_in_line(self) -> None:
        """A slot was freed: the longest-waiting call goes now."""
        while self._queued and self.stats.in_flight < self.config.max_in_flight and not self._failed:
            ticket = next(iter(self._queued))
            fwd, timer, timeout, since = self._queued.pop(ticket)
            timer.kill(block=False)
            self.stats.queued = len(self._queued)
            # the wait counts against the call's timeout: queued or sent, it is answered in time
            left = timeout - (time.monotonic() - since)
            if left < MIN_SEND_WINDOW:  # too late to be useful: the backend's work would only be cancelled
                self._answer_no_slot(fwd, timeout)
                continue
            self._dispatch(replace(fwd, timeout=left))

    def _dispatch(self, fwd: Forward) -> None:
        self.stats.in_flight += 1
        self._request(fwd.method, fwd.params, fwd.on_reply, timeout=fwd.timeout or self.config.timeout,
                      counted=True, on_progress=fwd.on_progress, origin=fwd.origin,
                      origin_request=fwd.origin_request)

    def _request(self, method: str, params: Any, on_reply, *, timeout: float, counted: bool = False,
                 on_progress=None, origin=None, origin_request=None) -> None:
        self._next_id += 1
        rid = self._next_id
        if on_progress is not None:
            # troupe's own token upstream (the request id): unique on this connection
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": rid}
        timer = gevent.spawn_later(timeout, self._tell, RequestTimedOut(rid))
        self._pending[rid] = _Pending(method, on_reply, timer, time.perf_counter(), timeout, counted,
                                      on_progress, origin, origin_request)
        assert self.transport is not None  # set in on_start before any request: only a ready server gets calls
        try:
            self.transport.send(jsonrpc.request(rid, method, params))
        except TransportError as exc:
            self._complete(rid, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"{self.config.name}: {exc}",
                                              server=self.config.name))

    def _complete(self, rid, outcome) -> None:
        pending = self._pending.pop(rid, None)
        if pending is None:
            return  # answered already (timeout, cancel, death): late replies are dropped
        if pending.timer is not None:
            pending.timer.kill(block=False)
        if pending.counted:
            self.stats.in_flight -= 1
            self.stats.record(time.perf_counter() - pending.started, not isinstance(outcome, UpstreamError))
        try:
            pending.on_reply(outcome)
        except Exception:
            self.log.exception("reply handler for {} failed", pending.method)
        if pending.counted:
            self._next_in_line()

    def _timed_out(self, rid: int) -> None:
        pending = self._pending.get(rid)
        if pending is None:
            return
        self._send(jsonrpc.notification("notifications/cancelled", {"requestId": rid, "reason": "timeout"}))
        if pending.counted:
            self.stats.timeouts += 1
        stalled = getattr(self.transport, "write_stalled_for", lambda: None)()
        hint = f"; it has not read its input for {stalled:.1f}s" if stalled else ""
        self._complete(rid, UpstreamError(jsonrpc.REQUEST_TIMEOUT,
                                          f"server {self.config.name} did not answer {pending.method} "
                                          f"within {pending.timeout:g}s (request cancelled){hint}",
                                          server=self.config.name))
        if pending.method in ("initialize", "ping"):
            return
        self._timeouts_in_a_row += 1
        if self._timeouts_in_a_row == DEGRADED_AFTER_TIMEOUTS:
            self.supervisor.tell(ConnectionDegraded(self.config.name, self.generation, False,
                                                    f"{self._timeouts_in_a_row} requests timed out in a row"))
        if self._hung_after and self._timeouts_in_a_row >= self._hung_after:
            self._probe()

    def _probe(self) -> None:
        """Slow tools or a wedged server? A ping that also goes unanswered means wedged."""
        if self._probing or self._failed:
            return
        self._probing = True
        self._request("ping", None, self._pinged, timeout=min(PING_TIMEOUT, self.config.timeout))

    def _pinged(self, outcome) -> None:
        self._probing = False
        # a reply to anything else meanwhile reset the count: then it is not wedged either
        if isinstance(outcome, UpstreamError) and outcome.code == jsonrpc.REQUEST_TIMEOUT \
                and self._timeouts_in_a_row >= self._hung_after:
            self._fail(f"hung: {self._timeouts_in_a_row} requests timed out in a row and a ping got no "
                       f"answer within {min(PING_TIMEOUT, self.config.timeout):g}s")
        else:
            self.log.info("{} requests timed out in a row, but it answers ping: slow, not hung",
                          self._timeouts_in_a_row)

    def _cancel(self, cancel: CancelForward) -> None:
        def matches(fwd_or_pending) -> bool:
            return fwd_or_pending.origin == cancel.origin and (
                cancel.origin_request is None or fwd_or_pending.origin_request == cancel.origin_request)
        if cancel.origin_request is None:  # the session is going away: it follows nothing any more
            self.subscriptions.drop(cancel.origin)
        for ticket in [t for t, (fwd, *_) in self._queued.items() if matches(fwd)]:
            self._queued.pop(ticket)[1].kill(block=False)  # never sent: nothing to cancel upstream
        self.stats.queued = len(self._queued)
        doomed = [rid for rid, p in self._pending.items() if matches(p)]
        for rid in doomed:
            pending = self._pending.pop(rid)
            if pending.timer is not None:
                pending.timer.kill(block=False)
            if pending.counted:
                self.stats.in_flight -= 1
            self._send(jsonrpc.notification("notifications/cancelled", {"requestId": rid, "reason": cancel.reason}))
        if doomed:
            self._next_in_line()

    def _send(self, message: dict) -> None:
        assert self.transport is not None  # sends answer the server or follow a request: it was opened
        try:
            self.transport.send(message)
        except TransportError as exc:
            self.log.debug("send failed: {}", exc)

    # ---------------------------------------------------------------- inbound

    def _inbound(self, msg) -> None:
        if isinstance(msg, TransportGarbage):
            lines = msg.lines  # the stdio reader sums a run of junk lines
            self.stats.garbage_lines += lines
            self._dropped(lines, f"ignored {lines} line(s) from server: {msg.reason}")
            if msg.request_id is not None and _usable_id(msg.request_id):
                self._complete(msg.request_id, UpstreamError(jsonrpc.INTERNAL_ERROR,
                                                             f"server {self.config.name}: {msg.reason}",
                                                             server=self.config.name))
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("method", ""), str):
            self.stats.garbage_lines += 1
            self._dropped(1, f"ignored a message that is not JSON-RPC ({type(msg).__name__})")
            return
        if not _usable_id(msg.get("id")):
            self.stats.bad_ids += 1
            self._dropped(1, f"dropped a message whose id is a {type(msg['id']).__name__}: "
                             f"{repr(msg['id'])[:ID_PREVIEW_CHARS]}")
            return
        if "method" in msg:
            if "id" in msg:
                self._server_request(msg)
            else:
                self._server_notification(msg)
            return
        rid = msg.get("id")
        if rid not in self._pending:
            self.log.debug("dropped reply for unknown or finished request {!r}", rid)
            return
        if self._timeouts_in_a_row and self._pending[rid].method != "ping":
            if self._timeouts_in_a_row >= DEGRADED_AFTER_TIMEOUTS:
                self.supervisor.tell(ConnectionDegraded(self.config.name, self.generation, True))
            self._timeouts_in_a_row = 0
        error = msg.get("error")
        if error is not None:
            if not isinstance(error, dict):
                error = {"code": jsonrpc.INTERNAL_ERROR, "message": str(error)}
            self._complete(rid, UpstreamError(error.get("code", jsonrpc.INTERNAL_ERROR),
                                              str(error.get("message", "")), error.get("data"),
                                              server=self.config.name))
        else:
            result = msg.get("result")
            self._complete(rid, result if isinstance(result, dict) else {})

    def _dropped(self, count: int, text: str) -> None:
        """Log what the server sent that troupe dropped, at most a few lines a second."""
        suppressed = self._log_budget.take(count)
        if suppressed is not None:
            self.log.warning("{}{}", text, f" ({suppressed} more not logged)" if suppressed else "")

    def _server_request(self, msg: dict) -> None:
        method, uid = msg["method"], msg["id"]
        if method == "ping":
            self._send(jsonrpc.result(uid, {}))
            return
        router = self._route
        if method not in RELAYED or router is None:
            self._send(jsonrpc.error(uid, jsonrpc.METHOD_NOT_FOUND, f"troupe does not relay {method}"))
            return
        # The client whose call is in flight here triggered it (the newest such call wins).
        origin = origin_request = None
        for p in reversed(self._pending.values()):
            if p.origin is not None:
                origin, origin_request = p.origin, p.origin_request
                break
        me = self.actor_ref

        def on_reply(outcome) -> None:  # runs in the session's greenlet
            try:
                me.tell(AnswerServer(uid, outcome))
            except pykka.ActorDeadError:
                pass
        timer = gevent.spawn_later(CLIENT_ANSWER_TIMEOUT, on_reply, UpstreamError(
            jsonrpc.REQUEST_TIMEOUT, f"no client answered {method} within {CLIENT_ANSWER_TIMEOUT:g}s"))
        params = msg.get("params")
        params = params if isinstance(params, dict) else {}
        session = router(ServerRequest(self.config.name, uid, method, params, on_reply, origin_request), origin)
        self._relayed[uid] = (timer, session)

    def _answer_server(self, uid, outcome) -> None:
        entry = self._relayed.pop(uid, None)
        if entry is None:
            return  # answered already (timeout or cancel): one answer only
        entry[0].kill(block=False)
        if isinstance(outcome, UpstreamError):
            self._send(jsonrpc.error(uid, outcome.code, outcome.message, outcome.data))
        else:
            self._send(jsonrpc.result(uid, outcome))

    def _server_notification(self, msg: dict) -> None:
        method, params = msg["method"], msg.get("params") or {}
        if not isinstance(params, dict):
            params = {}
        if method == "notifications/progress":
            token: Any = params.get("progressToken")
            pending = self._pending.get(token) if _usable_id(token) else None
            if pending is not None and pending.on_progress is not None:
                pending.on_progress(params)
        elif method in mcp.LIST_CHANGED:
            if self._ready:
                self._list(mcp.LIST_CHANGED[method])
        elif method == "notifications/message":
            if self.bus is not None:
                self.bus.publish(ServerLogged(self.config.name, str(params.get("level") or "info"),
                                              params.get("logger"), params.get("data")))
        elif method == "notifications/resources/updated":
            if self.bus is not None and isinstance(params.get("uri"), str):
                self.bus.publish(ResourceUpdated(self.config.name, params["uri"]))
        elif method == "notifications/cancelled":
            uid = params.get("requestId")
            entry = self._relayed.pop(uid, None) if _usable_id(uid) else None
            if entry is not None:  # the server gave up on its own request to a client
                entry[0].kill(block=False)
                if entry[1] is not None:
                    entry[1].tell(ServerRequestCancelled(self.config.name, params.get("requestId")))
        else:
            self.log.debug("unhandled notification {}", method)

    def _set_log_level(self, level: str) -> None:
        if self._ready and "logging" in self.capabilities:
            self._request("logging/setLevel", {"level": level}, self._log_level_set, timeout=self.config.timeout)

    def _log_level_set(self, outcome) -> None:
        if isinstance(outcome, UpstreamError):
            self.log.debug("logging/setLevel refused: {}", outcome.message)

    # ---------------------------------------------------------------- failure

    def _fail(self, reason: str) -> None:
        if self._failed:
            return
        self._failed = True
        self._ready = False
        self.log.warning("connection failed: {}", reason)
        self._fail_all(f"server {self.config.name} failed: {reason}")
        self.supervisor.tell(ConnectionFailed(self.config.name, self.generation, reason))

    def _fail_all(self, message: str) -> None:
        queued, self._queued = self._queued, {}
        self.stats.queued = 0
        for fwd, timer, *_ in queued.values():
            timer.kill(block=False)
            try:
                fwd.on_reply(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, message, server=self.config.name,
                                           link_lost=True))
            except Exception:
                self.log.exception("reply handler failed")
        relayed, self._relayed = self._relayed, {}
        for timer, _session in relayed.values():
            timer.kill(block=False)
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if p.timer is not None:
                p.timer.kill(block=False)
            if p.counted:
                self.stats.in_flight -= 1
                self.stats.record(time.perf_counter() - p.started, False)
            try:
                p.on_reply(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, message, server=self.config.name,
                                         link_lost=True))
            except Exception:
                self.log.exception("reply handler failed")


def _usable_id(value) -> bool:
    """A JSON-RPC id troupe can look up: a string, a number or null (a list or an object is not,
    and true would pass for request 1)."""
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))
