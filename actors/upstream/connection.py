"""Connection actor: the client side of MCP for one upstream server."""
from __future__ import annotations

import functools
from typing import Any, Callable

import pykka
from loguru import logger

from actors.messages import (
    AnswerServer,
    CancelForward,
    ConnectionFailed,
    ConnectionRetired,
    Forward,
    GetStats,
    Inbound,
    NotifyUpstream,
    QueuedTimedOut,
    RequestTimedOut,
    SetLogLevel,
    TransportClosed,
    UpstreamError,
)
from actors.protocol import handshake, jsonrpc, mcp, modern_client, server_shapes
from actors.protocol.modern_client import MODERN
from actors.settings.config import ServerConfig
from actors.supervision.policy import HUNG_AFTER_TIMEOUTS
from actors.transports.base import LinkFailure, OnStream, Transport, TransportError, TransportGarbage
from actors.transports.factory import make_transport  # the Supervisor's default factory, from here as before
from actors.supervision.demand import StopIdle
from actors.upstream.idling import IdleCheck, IdleWatch
from actors.upstream.listing import UpstreamLists
from actors.upstream.backpressure import Backpressure
from actors.upstream.liveness import Liveness
from actors.upstream.modern import ListenDue, RelistDue
from actors.upstream.opening import EraOpening
from actors.upstream.publishing import ListPublishing, ListsPublished
from actors.upstream.requests import RequestTable, usable_id
from actors.upstream.server_messages import ServerMessages
from actors.upstream.stats import LogBudget, ServerStats
from actors.upstream.subscriptions import UpstreamSubscriptions
from actors.upstream.waiting import WaitingLine
from actors.tells import tell, unread_tells

ID_PREVIEW_CHARS = 60  # how much of an unusable id a log line quotes
# troupe's own requests that say nothing of the server's health when they time out
OWN_METHODS = ("initialize", "ping", modern_client.DISCOVER, modern_client.LISTEN)


class Connection(EraOpening, ListPublishing, Backpressure, IdleWatch, pykka.ThreadingActor):
    """Owns one upstream server's transport and, each in a plain object only its greenlet
    touches: its requests in flight (RequestTable), the calls waiting beyond max_in_flight
    (WaitingLine), what the server sends unasked (ServerMessages), its lists (UpstreamLists:
    re-reads coalesced per kind; ListPublishing hands on only a list that changed),
    the resource subscriptions and the timeouts in a row (Liveness).

    Receives Forward (answered through its on_reply), CancelForward, AnswerServer, SetLogLevel
    and NotifyUpstream; from its own greenlets Inbound, TransportClosed, RequestTimedOut and
    QueuedTimedOut; an on-demand one also StopIdle (and its own IdleCheck: idling.py), telling the
    Supervisor ConnectionIdle and ConnectionIdled. Sends PublishServer to the Registry (a client's
    own upstream has none and lists nothing into the catalogue); ConnectionReady, ConnectionCounts,
    ConnectionDegraded and ConnectionFailed to the Supervisor; ServerRequest (through the
    router) and ServerRequestCancelled to the calling Session; ServerLogged and
    ResourceUpdated to the bus.
    """

    def __init__(self, config: ServerConfig, generation: int, supervisor: pykka.ActorRef,
                 registry: pykka.ActorRef | None, *,
                 transport_factory: Callable[..., Transport] = make_transport, client_capabilities: dict | None = None,
                 bus=None, route_server_request=None, log_level: str | None = None,
                 hung_after: int = HUNG_AFTER_TIMEOUTS, era: str | None = None) -> None:
        super().__init__()
        self.config, self.generation = config, generation
        self.supervisor, self.registry = supervisor, registry
        self.stats = ServerStats()  # this generation's own; others ask GetStats for a snapshot
        self.log = logger.bind(server=config.name)
        self._factory = transport_factory
        self._client_caps = client_capabilities or {}
        # auth: per_client: each client's requests go out with its own token (the transport picks it)
        self._per_client = bool(config.auth and config.auth.per_client and config.http)
        self.log_level = log_level  # the level upstreams log at, as the Supervisor last told
        self.transport = None
        # Timers only tell this actor: every deadline is handled in its own turn.
        self.requests = RequestTable(self.stats, lambda rid: self._tell(RequestTimedOut(rid)), log=self.log)
        self.waiting = WaitingLine(self.stats, lambda ticket: self._tell(QueuedTimedOut(ticket)))
        self.subscriptions = UpstreamSubscriptions(self._subscription_request)
        self.lists = UpstreamLists(self._own_request, self._lists_read, stats=self.stats, log=self.log,
                                   on_stale=lambda kinds: self.server_messages.lists_stale(kinds),
                                   keep={"tools": config.max_tools})
        self.server_messages = ServerMessages(
            config.name, self.requests, self._send, route=route_server_request, bus=bus, log=self.log,
            answer_later=lambda uid, outcome: self._tell(AnswerServer(uid, outcome)),
            on_list_changed=self._list_changed)
        self._ready = False
        self._failed = False
        self._announcing = False  # the first listing is with the Registry, not yet published
        self._ready_counts: tuple[int, int, int] = (0, 0, 0)
        self._used = False  # a client's request reached this server: it may now act on what it was told
        self.liveness = Liveness(config.name, generation, hung_after, report=functools.partial(tell, supervisor),
                                 fail=self._fail, ping=self._liveness_probe, log=self.log)
        self._init_era(era)
        self._log_budget = LogBudget()  # log lines about what the server sent that troupe dropped
        self.capabilities: dict = {}
        self.server_info: dict = {}
        self.instructions = ""
        self.protocol_version = mcp.LATEST
        self._init_idle(registry is not None)  # a client's own upstream (no registry) is never idle-stopped

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
        self._open()

    def on_stop(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.kill(block=False)
        self.modern.close()
        unread = unread_tells(self)
        self._settle_unread_answers(unread)
        self._fail_all(f"{self.config.name}: connection stopped")
        self._answer_unread(unread)
        # Its totals outlive it: the supervisor adds them to the server's (False: troupe is stopping).
        tell(self.supervisor, ConnectionRetired(self.config.name, self.generation, self.stats.snapshot()))
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
        tell(self.actor_ref, message)  # False: late news for a stopped connection, nobody is waiting for it

    def _from_transport(self, message) -> None:
        self._tell(Inbound(message))

    def _transport_closed(self, reason: str) -> None:
        self._tell(TransportClosed(reason))

    # ---------------------------------------------------------------- handshake and lists

    def _opened(self, opened: handshake.Handshake) -> None:
        self.protocol_version = opened.version
        self.capabilities, self.server_info = opened.capabilities, opened.server_info
        self.instructions = opened.instructions
        assert self.transport is not None  # opened in on_start before initialize was sent
        self.transport.set_protocol_version(opened.version)
        confirm = handshake.confirmation(opened)
        if confirm is not None:
            self._send(confirm)
        self.lists.read(tuple(mcp.LIST_METHODS), self.capabilities)

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
                self.server_messages.answer(uid, outcome)
            case SetLogLevel(level=level):
                self.log_level = level
                self._set_log_level(level)
            case NotifyUpstream(method=method, params=params):
                if self.era != MODERN:  # the stateless era removed the client's notifications (roots…)
                    self._send(jsonrpc.notification(method, params))
            case TransportClosed(reason=reason):
                if not self._respawned_legacy(reason):
                    self._fail(reason)
            case ListenDue(epoch=epoch):
                if self._ready and self.era == MODERN and (epoch < 0 or self.modern.listen_due(epoch)):
                    self.modern.listen(self.capabilities, self.subscriptions.uris())
            case ListsPublished(generation=generation):
                if generation == self.generation:
                    self.announce_ready()
                    self._arm_idle()
            case IdleCheck(generation=generation) if generation == self.generation:
                self._idle_check()
            case StopIdle():
                self._stop_idle(message)
            case RelistDue(kinds=kinds):
                self._relist_due(kinds)
            case _:
                self.log.warning("connection: unknown message {!r}", message)

    # ---------------------------------------------------------------- requests

    def _forward(self, fwd: Forward) -> None:
        if self.idled:
            self._unsent_idle(fwd)
            return
        self._used = True
        self._active(fwd)
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

    def _dispatch(self, fwd: Forward) -> None:
        self._request(fwd.method, fwd.params, fwd.on_reply, timeout=fwd.timeout or self.config.timeout,
                      counted=True, on_progress=fwd.on_progress, origin=fwd.origin,
                      origin_request=fwd.origin_request, client_capabilities=fwd.client_capabilities,
                      log_level=fwd.log_level, client=fwd.client if self._per_client else None, caller=fwd.caller)

    def _liveness_probe(self, on_reply, wait: float) -> None:
        # A modern server has no ping: another request (server/discover) shows it alive.
        self._request(modern_client.DISCOVER if self.era == MODERN else "ping", None, on_reply, timeout=wait)

    def _own_request(self, method: str, params: Any, on_reply) -> None:
        """A request troupe makes for itself (lists, subscriptions), bounded by the server's timeout."""
        self._request(method, params, on_reply, timeout=self.config.timeout)

    def _request(self, method: str, params: Any, on_reply, *, timeout: float, counted: bool = False,
                 on_progress=None, origin=None, origin_request=None, client_capabilities=None,
                 log_level: str | None = None, client: str | None = None, caller=None) -> int:
        rid = self.requests.open(method, on_reply, timeout=timeout, counted=counted, on_progress=on_progress,
                                 origin=origin, origin_request=origin_request, caller=caller)
        if on_progress is not None:
            # troupe's own token upstream (the request id): unique on this connection
            params = dict(params or {})
            params["_meta"] = {**(params.get("_meta") or {}), "progressToken": rid}
        if self.era == MODERN or method == modern_client.DISCOVER:
            # Stateless: every request says who asks and what the caller can do; logs are asked per
            # request. A client's call declares what that client can take; troupe's own requests (its
            # listings, above all) declare everything troupe relays, as its initialize does, so that
            # the lists do not depend on which client is connected.
            caps = client_capabilities if origin is not None else self._client_caps
            params = modern_client.envelope(params, modern_client.relayable(caps), log_level or self.log_level)
        assert self.transport is not None  # set in on_start before any request: only a ready server gets calls
        try:
            if client is None:
                self.transport.send(jsonrpc.request(rid, method, params))
            else:  # a per_client server: the HTTP transport sends it with that client's own token
                self.transport.send(jsonrpc.request(rid, method, params), client=client)
        except TransportError as exc:
            self._complete(rid, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"{self.config.name}: {exc}",
                                              server=self.config.name))
        return rid

    def _complete(self, rid, outcome) -> None:
        pending = self.requests.complete(rid, outcome)  # None: answered already, a late reply is dropped
        if pending is not None and pending.counted:
            self._quiet()
            self._next_in_line()

    def _timed_out(self, rid: int) -> None:
        pending = self.requests.get(rid)
        if pending is None:
            return
        self._send(jsonrpc.notification("notifications/cancelled", {"requestId": rid, "reason": "timeout"}))
        stalled = getattr(self.transport, "write_stalled_for", lambda: None)()
        hint = f"; it has not read its input for {stalled:.1f}s" if stalled else ""
        self.requests.time_out(rid, UpstreamError(jsonrpc.REQUEST_TIMEOUT,
                                                  f"server {self.config.name} did not answer {pending.method} "
                                                  f"within {pending.timeout:g}s (request cancelled){hint}",
                                                  server=self.config.name))
        if pending.counted:
            self._next_in_line()
        if pending.method not in OWN_METHODS:
            self.liveness.timed_out(self.config.timeout, failed=self._failed)

    def _cancel(self, cancel: CancelForward) -> None:
        if cancel.origin_request is None:  # the session is going away: it follows nothing any more
            self.subscriptions.drop(cancel.origin)
        self.waiting.drop_matching(cancel.origin, cancel.origin_request)
        doomed = self.requests.cancel_matching(cancel.origin, cancel.origin_request)
        for rid in doomed:
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
        related = None  # the request whose response stream carried a server's request (Streamable HTTP)
        if isinstance(msg, OnStream):
            msg, related = msg.message, msg.request_id
        if isinstance(msg, TransportGarbage):
            lines = msg.lines  # the stdio reader sums a run of junk lines
            self.stats.garbage_lines += lines
            self._dropped(lines, f"ignored {lines} line(s) from server: {msg.reason}")
            if msg.request_id is not None:  # the table ignores an id that cannot be one of ours
                self._complete(msg.request_id, UpstreamError(jsonrpc.INTERNAL_ERROR,
                                                             f"server {self.config.name}: {msg.reason}",
                                                             server=self.config.name))
            return
        if isinstance(msg, LinkFailure):  # below HTTP: whether it was sent decides if it may go again
            link = "lost" if msg.sent else "unsent"
            self._complete(msg.request_id, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, msg.reason,
                                                         server=self.config.name, link=link))
            return
        if not isinstance(msg, dict) or not isinstance(msg.get("method", ""), str):
            self.stats.garbage_lines += 1
            self._dropped(1, f"ignored a message that is not JSON-RPC ({type(msg).__name__})")
            return
        if not usable_id(msg.get("id")):
            self.stats.bad_ids += 1
            self._dropped(1, f"dropped a message whose id is a {type(msg['id']).__name__}: "
                             f"{repr(msg['id'])[:ID_PREVIEW_CHARS]}")
            return
        if "method" in msg:
            problem = server_shapes.message_problem(msg)
            if problem is not None:  # refused (so the server waits for nothing) or dropped, and logged
                self._dropped(1, f"refused a malformed {msg['method'][:ID_PREVIEW_CHARS]}: {problem}")
                if "id" in msg:
                    self._send(jsonrpc.error(msg["id"], jsonrpc.INVALID_PARAMS, f"troupe: {problem}"))
            elif msg["method"] == modern_client.ACKNOWLEDGED:
                self.modern.acknowledged()
            elif "id" in msg:
                self.server_messages.request(msg, related)
            else:
                self.server_messages.notification(msg)
            return
        rid = msg.get("id")
        pending = self.requests.get(rid)
        if pending is None:
            self.requests.drop_late(rid)
            return
        if pending.method not in ("ping", modern_client.DISCOVER):
            self.liveness.answered()
        self._complete(rid, self.requests.outcome(msg, pending, self.config.name))

    def _dropped(self, count: int, text: str) -> None:
        """Log what the server sent that troupe dropped, at most a few lines a second."""
        suppressed = self._log_budget.take(count)
        if suppressed is not None:
            self.log.warning("{}{}", text, f" ({suppressed} more not logged)" if suppressed else "")

    def _set_log_level(self, level: str) -> None:
        # a modern server has no logging/setLevel: the level travels in each request's _meta
        if self._ready and "logging" in self.capabilities and self.era != MODERN:
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
        # False: the supervisor stopped, and with it every connection it would restart.
        tell(self.supervisor, ConnectionFailed(self.config.name, self.generation, reason))

    def _settle_unread_answers(self, unread: list) -> None:
        """Answers and link failures the transport delivered before this stop was handled, still
        in the mailbox behind it: each settles its call with what really happened. Failed as
        "connection stopped" instead, a call an owner's relay endpoint refused to connect for
        read as one that may have run there (a FailoverFront then would not send it on). The
        waiting line goes first, as never sent: a settled call must not free a slot for one."""
        self._answer_waiting(f"{self.config.name}: connection stopped")
        for message in unread:
            msg = message.message if isinstance(message, Inbound) else None
            pending = self.requests.get(_answered_id(msg))
            if pending is not None and pending.counted:  # a client's call; troupe's own requests end below
                self._inbound(msg)

    def _fail_all(self, message: str) -> None:
        lost = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, message, server=self.config.name, link_lost=True)
        self._answer_waiting(message)
        self.server_messages.clear()
        self.requests.fail_all(lost)


def _answered_id(msg: Any) -> Any:
    """The id of the request a message from the transport settles (a response, or a LinkFailure
    saying whether it was sent); None for anything else (None is no pending id of troupe's)."""
    if isinstance(msg, LinkFailure):
        return msg.request_id
    if isinstance(msg, dict) and "method" not in msg:
        return msg.get("id")
    return None
