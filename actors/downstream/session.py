"""Session actor: one downstream MCP client; routes its requests, answers exactly once."""
from __future__ import annotations

import itertools

import gevent
import pykka
from loguru import logger

from actors.caching.messages import CacheAnswered
from actors.caching.session_side import CachedCalls
from actors.downstream.batches import serve_batch
from actors.downstream.client_requests import AnswerOverdue, ClientRequests
from actors.downstream.client_subscriptions import ClientSubscriptions
from actors.downstream.client_view import ClientView
from actors.downstream.lifecycle import Lifecycle
from actors.downstream.forwarding import IDEMPOTENT_METHODS, ForwardedCalls, Retry, progress_relay, retry_when_back
from actors.downstream.listens import Listens, ListenSubscribed
from actors.downstream.input_rounds import InputAnswered, InputRounds, ParkExpired
from actors.downstream.modern_calls import ModernCalls
from actors.catalogue.digests import cursor_digest
from actors.downstream.replies import BadCursor, ignore, page
from actors.downstream.resource_calls import ResourceCalls
from actors.downstream.tool_calls import ToolCalls
from actors.events.kinds import ResourceUpdated, ServerLogged
from actors.messages import (
    CancelForward,
    CatalogueUpdated,
    ClientGone,
    ClientMessage,
    Forward,
    ForwardExpired,
    ForwardReplied,
    ServerRequest,
    ServerRequestCancelled,
    UpstreamError,
)
from actors.protocol import jsonrpc, mcp, modern
from actors.tells import tell as _tell
from actors.workflows.session_calls import WorkflowCalls, WorkflowRuns, WorkflowsChanged

_session_ids = itertools.count(1)
BATCH_VERSION = "2025-03-26"  # the only protocol version with JSON-RPC batches
# The connection's own timeout answers first (and cancels upstream); this margin on top of it
# is the caller's net for a callee that can no longer answer at all.
DEADLINE_MARGIN = 2.0


class _Deferred:
    """A tools/list that waited for start-up to settle, now due."""

    __slots__ = ("message", "sink", "principal")

    def __init__(self, message, sink, principal: str):
        self.message, self.sink, self.principal = message, sink, principal


class Session(ToolCalls, ResourceCalls, CachedCalls, ModernCalls, InputRounds, Lifecycle, ClientView, WorkflowCalls,
              pykka.ThreadingActor):
    """Owns one downstream client: its capabilities and protocol version, the calls it awaits
    (each with its own deadline), the server requests relayed to it, its log level and its
    resource subscriptions and its open subscriptions/listen streams; reads the catalogue and
    the server directory with no actor hop. Request handlers come by family from ToolCalls,
    ResourceCalls, ModernCalls, InputRounds and Lifecycle (no state of their own); the server requests relayed to the
    client, its subscriptions and its listen streams are held objects (ClientRequests,
    ClientSubscriptions, Listens) that only this actor's greenlet touches. A modern (2026-07-28)
    request is served from its own _meta alone: nothing of it is kept here.

    Receives ClientMessage and ClientGone (from the serve front); ForwardReplied, ForwardExpired,
    Retry, _Deferred, AnswerOverdue, InputAnswered, ParkExpired and CacheAnswered (answers, deadlines,
    retries, cache lookups and start-up waits of its own calls, the deadlines of requests relayed to the client, and the
    rounds of calls that need the client's input);
    CatalogueUpdated, ServerLogged, ResourceUpdated and WorkflowsChanged (from the bus); ServerRequest,
    ServerRequestCancelled and ListenSubscribed (from a Connection). Sends Forward and CancelForward
    to Connections, LookUp and Store to the CacheKeeper, SetSessionLogLevel to the Supervisor and
    NotifyUpstream to every Connection (both through Runtime), and its answers and notifications
    to the client through its sinks.
    """

    def __init__(self, runtime, notify=None, key: str | None = None, mode: str | None = None, client=None) -> None:
        super().__init__()
        self.rt = runtime
        self._init_view(client)  # its client (serve.clients) and that client's profile: what it may see
        self.key = key or f"s{next(_session_ids)}"
        self.notify = notify  # sink for unsolicited messages (list_changed); None = cannot receive
        self.client_caps: dict = {}
        self.client_info: dict = {}
        self.protocol_version = mcp.LATEST
        self.initialized = False
        self.mode = mode or runtime.config.serve.mode
        me = self.actor_ref  # timers reach this Session through its own mailbox
        self._inflight = ForwardedCalls(lambda token: _tell(me, ForwardExpired(token)))
        self.client_requests = ClientRequests(lambda our_id: _tell(me, AnswerOverdue(our_id)))
        self.subscriptions = ClientSubscriptions(self._unsubscribe_upstream)
        self.listens = Listens(self._listen_unsubscriber)
        self.workflow_runs = WorkflowRuns()  # its workflow calls' runners (actors/workflows)
        self._after_wait = False
        self.log_level: str | None = None  # set by logging/setLevel; None = relay no logs
        self._served_version = {"tools": -1, "resources": -1, "prompts": -1}  # last catalogue shown per list

    def on_start(self) -> None:
        assert self.rt.bus is not None  # sessions start on a started runtime, whose bus stays
        self.rt.bus.subscribe(self.key, self._on_event, ("ToolsChanged", "ServerLogged", "ResourceUpdated",
                                                         "WorkflowsChanged"))

    def on_stop(self) -> None:
        assert self.rt.bus is not None  # set before on_start, never cleared
        self.rt.bus.unsubscribe(self.key)
        self.client_requests.close("the client went away")  # the upstream must not wait for a gone client
        self._release_rounds("the client went away")
        self._cancel_all("client disconnected")
        self.rt.set_log_level(self.actor_ref, None)
        self.subscriptions.close()
        self.listens.close()  # each stream answered: it ended with its client

    def on_failure(self, exc_type, exc_value, traceback) -> None:
        # pykka skips on_stop after a crash: cancel this client's upstream calls anyway.
        self.on_stop()

    def _on_event(self, event) -> None:  # runs in the bus greenlet: only a tell
        try:
            if event.kind == "ToolsChanged":
                self.actor_ref.tell(CatalogueUpdated(event.lists, event.version))
            else:
                self.actor_ref.tell(event)
        except pykka.ActorDeadError:
            pass

    # ---------------------------------------------------------------- dispatch

    def on_receive(self, message):
        match message:
            case ClientMessage(message=msg, sink=sink, principal=principal):
                self._client_message(msg, sink, principal or self.key)
            case _Deferred(message=msg, sink=sink, principal=principal):
                self._after_wait = True  # start-up wait is over (settled or timed out): answer now
                try:
                    self._request(msg, sink, principal)
                finally:
                    self._after_wait = False
            case CatalogueUpdated(lists=lists, version=version):
                lists = self.changed_in_view(lists)  # a change this client cannot see is no news to it
                self._list_changed(lists, version)
                self.listens.list_changed([k for k in lists if not (k == "tools" and self.mode == "meta")])
            case ListenSubscribed():
                self.listens.subscribed(message)
            case ForwardReplied(token=token, outcome=outcome):
                self._settle(token, outcome)
            case ForwardExpired(token=token):
                self._expire(token)
            case CacheAnswered():
                self._cache_answered(message)
            case InputAnswered():
                self._input_answered(message)
            case ParkExpired():
                self._park_expired(message)
            case Retry():
                self._forward(message.rid, message.server, message.method, message.params, message.sink,
                              message.shape, message.token, retry=False)
            case ServerRequest():
                if self._refuse_undeclared(message):
                    return
                call = self._inflight.current(message.origin_request)
                if call is not None and (call.parked or modern.envelope_of(call.sink) is not None):
                    self._park(call, message)  # a modern client takes no requests: it hears input_required
                    return
                # it travels on the stream of the client's call that triggered it, if still open
                self.client_requests.send(message, self.client_caps, call.sink if call is not None else self.notify)
            case AnswerOverdue(our_id=our_id):
                self.client_requests.expire(our_id)
            case ServerRequestCancelled(server=server, upstream_id=uid):
                for our_id in self.client_requests.cancelled(server, uid):
                    if self.notify is not None:
                        self.notify(jsonrpc.notification("notifications/cancelled", {"requestId": our_id}))
            case ServerLogged():
                self._relay_log(message)
                self._relay_log_to_requests(message)
            case ResourceUpdated(server=server, uri=uri):
                self.listens.updated(server, uri)
                exposed = self.subscriptions.exposed_uri(server, uri)
                if exposed is not None and self.notify is not None:
                    self.notify(jsonrpc.notification("notifications/resources/updated", {"uri": exposed}))
            case WorkflowsChanged(names=names):
                self._workflows_changed(names)
            case ClientGone(reason=reason):
                self._cancel_all(reason)
                self.actor_ref.stop(block=False)
            case _:
                logger.warning("session: unknown message {!r}", message)

    def _client_message(self, msg, sink, principal: str) -> None:
        if isinstance(msg, list) and msg and self.protocol_version == BATCH_VERSION:
            serve_batch(msg, sink, lambda m, s: self._client_message(m, s, principal))
            return
        if not isinstance(msg, dict):
            sink(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "expected one JSON-RPC object" + (
                f" (batches only with protocol {BATCH_VERSION})" if isinstance(msg, list) else "")))
            return
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or (method is not None and not isinstance(method, str)):
            if "id" in msg and method is not None:
                sink(jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST, "not a JSON-RPC 2.0 request"))
            elif method is not None:
                pass  # a malformed notification gets no answer, by JSON-RPC's rules
            else:
                sink(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "not a JSON-RPC 2.0 message"))
            return
        if method is None:
            if "result" in msg or "error" in msg:
                if not self.client_requests.answer(msg):
                    logger.debug("session {}: response to unknown request {!r} dropped", self.key, msg.get("id"))
            else:  # neither a request, a notification nor a response: say so
                sink(jsonrpc.error(msg.get("id") if isinstance(msg.get("id"), (str, int)) else None,
                                   jsonrpc.INVALID_REQUEST, "message has no method, result or error"))
            return
        if "id" not in msg:
            self._notification(method, msg.get("params") or {})
            return
        if msg["id"] is None or isinstance(msg["id"], (bool, float, dict, list)):
            sink(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "request id must be a string or an integer"))
            return
        self._request(msg, sink, principal)

    def _notification(self, method: str, params: dict) -> None:
        if not isinstance(params, dict) or (modern.is_modern(params) and method in modern.REMOVED_NOTIFICATIONS):
            return  # a modern client's state travels in its requests; these mean nothing from it
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/roots/list_changed":
            self.rt.notify_upstreams("notifications/roots/list_changed")
        elif method == "notifications/cancelled":
            rid = params.get("requestId")
            if self.listens.end(rid):
                return  # a listen stream is over: answered, its resources unfollowed
            call = self._inflight.withdraw(rid)
            if call is not None:  # no answer is owed any more
                _tell(call.ref, CancelForward(self.actor_ref, call.token,
                                              str(params.get("reason") or "cancelled by client")))
            else:  # a workflow's runner stops, cancelling its steps
                self.workflow_runs.cancel(rid, str(params.get("reason") or "cancelled by client"))

    def _request(self, msg: dict, sink, principal: str) -> None:
        rid, method = msg["id"], msg["method"]
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "params must be an object"))
            return
        if modern.is_modern(params):
            # stateless: served by this request's own _meta alone (it travels with the sink)
            served = self._modern_request(rid, method, params, sink, principal)
            if served is None:
                return
            params, sink = served
        handler = _METHODS.get(method)
        if handler is None:
            sink(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        try:
            handler(self, rid, params, sink, msg)
        except Exception as exc:  # a bug answers this request; it must not kill the session
            logger.exception("session: {} failed", method)
            sink(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"troupe internal error in {method}: {exc}"))

    # ---------------------------------------------------------------- answers and forwarding

    def _paged(self, rid, params, sink, items, key, cat, variant=()) -> None:
        """One page of `items` (cut from snapshot `cat`; `variant` names what else shaped them),
        its cursor a digest of their content: any instance with the same catalogue continues it."""
        digest = cursor_digest(cat, key, variant)
        try:
            sink(jsonrpc.result(rid, page(items, params, key, digest)))
        except BadCursor as exc:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, str(exc)))

    def _starting_up(self) -> bool:
        return not self._after_wait and not self.rt.settled.is_set()

    def _defer(self, msg, sink) -> None:
        """Answer once every auto-start server is ready or failed, bounded by startup_wait."""
        ref, settled, wait = self.actor_ref, self.rt.settled, self.rt.config.serve.startup_wait
        principal = getattr(sink, "principal", "") or self.key  # a modern request's own, kept on its sink

        def later():
            settled.wait(timeout=wait)
            try:
                ref.tell(_Deferred(msg, sink, principal))
            except pykka.ActorDeadError:
                pass
        gevent.spawn(later)

    def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                 retry: bool | None = None) -> None:
        """Send to the owning connection; `shape(rid, outcome)` builds the one answer.

        An idempotent read whose connection died under it is sent once more when the
        server is back (bounded); a tools/call only when `retry` says so.
        """
        if isinstance(sink, modern.ModernSink) and sink.retry is not None:  # a modern client's next round
            continued = self._continue_round(rid, server, method, params, sink, shape)
            if continued is None:
                return
            params = continued
        ref, status = self.rt.connection_or_status(server)
        if ref is None:
            sink(shape(rid, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, status, server=server)))
            return
        if retry is None:
            retry = method in IDEMPOTENT_METHODS
        again = Retry(rid, server, method, params, sink, shape, progress_token) if retry else None
        token = self._inflight.open(rid, server, method, params, sink, shape, ref, again,
                                    self.rt.server_timeout(server) + DEADLINE_MARGIN)
        me = self.actor_ref

        def on_reply(outcome) -> None:  # runs in the connection's greenlet: a tell, nothing else
            _tell(me, ForwardReplied(token, outcome))
        on_progress = progress_relay(progress_token, sink) if progress_token is not None else None
        if not _tell(ref, Forward(method, params, on_reply, on_progress=on_progress, origin=self.actor_ref,
                                  origin_request=token, client_capabilities=self._relayed_capabilities(sink),
                                  log_level=self._relayed_log_level(sink), client=self.client_name)):
            self._settle(token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {server} went away",
                                              server=server, link_lost=True))

    def _settle(self, token: int, outcome) -> None:
        """The one answer to a forwarded request (or its retry once the server is back, or its
        next round when the server asks for input)."""
        call = self._inflight.current(token)
        if call is None:
            return  # cancelled or expired: answered already
        if call.parked:  # it ended while its client was away: kept for the retry (InputRounds)
            assert call.rounds is not None  # only a call with rounds is parked
            call.rounds.outcome = outcome
            return
        if modern.input_required(outcome):
            self._input_required(call, outcome)
            return
        self._inflight.settle(token)
        if call.retry is not None and isinstance(outcome, UpstreamError) and outcome.link_lost:
            gevent.spawn(retry_when_back, self.rt, self.actor_ref, call.server, call.ref, outcome, call.retry)
            return
        call.sink(call.shape(call.rid, outcome))

    def _expire(self, token: int) -> None:
        call = self._inflight.current(token)
        if call is None or call.parked:
            return
        waited = self.rt.server_timeout(call.server) + DEADLINE_MARGIN
        _tell(call.ref, CancelForward(self.actor_ref, token, "troupe's deadline passed"))
        self._settle(token, UpstreamError(
            jsonrpc.REQUEST_TIMEOUT, f"server {call.server} gave no answer within {waited:g}s", server=call.server))

    # ---------------------------------------------------------------- notifications out

    def _unsubscribe_upstream(self, server: str, uri: str) -> None:
        """The connection counts followers: upstream hears unsubscribe when the last one leaves."""
        ref = self.rt.connection(server)
        if ref is not None:
            try:
                ref.tell(Forward("resources/unsubscribe", {"uri": uri}, ignore, origin=self.actor_ref))
            except pykka.ActorDeadError:
                pass  # a new generation of it never heard of this subscription

    def _cancel_all(self, reason: str) -> None:
        self.workflow_runs.close(reason)
        for ref in self._inflight.close():
            _tell(ref, CancelForward(self.actor_ref, None, reason))


_METHODS = {
    "initialize": Session._initialize,
    "ping": Session._ping,
    "tools/list": Session._tools_list,
    "tools/call": Session._tools_call,
    "resources/list": Session._resources_list,
    "resources/templates/list": Session._templates_list,
    "resources/read": Session._resources_read,
    "prompts/list": Session._prompts_list,
    "prompts/get": Session._prompts_get,
    "resources/subscribe": Session._subscribe,
    "resources/unsubscribe": Session._unsubscribe,
    "logging/setLevel": Session._set_level,
    "completion/complete": Session._complete,
    "server/discover": Session._discover,
    "subscriptions/listen": Session._listen,
}
