"""Session actor: one downstream MCP client; routes its requests, answers exactly once."""
from __future__ import annotations

import itertools

import gevent
import pykka
from loguru import logger

from actors.caching.messages import CacheAnswered
from actors.caching.session_side import CachedCalls
from actors.downstream.calls import (
    BACK, FORWARDED, IDEMPOTENT_METHODS, LOCAL, LOOKUP, RETRY_WAIT, SETTLING, CallDone, CallNotice, CallTable,
    Progressed, ServerBack, Settled, progress_notice, wait_for_server, withdrawn,
)
from actors.downstream.batches import serve_batch
from actors.downstream.client_requests import AnswerOverdue, ClientRequests
from actors.downstream.client_subscriptions import ClientSubscriptions
from actors.downstream.client_view import ClientView
from actors.downstream.lifecycle import Lifecycle
from actors.downstream.listens import Listens, ListenSubscribed
from actors.downstream.input_rounds import InputAnswered, InputRounds, ParkExpired
from actors.downstream.modern_calls import ModernCalls
from actors.downstream.replies import BadCursor, content_digest, ignore, page
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
from actors.workflows.session_calls import WorkflowCalls, WorkflowsChanged

_session_ids = itertools.count(1)
BATCH_VERSION = "2025-03-26"  # the only protocol version with JSON-RPC batches
# The connection's own timeout answers first (and cancels upstream); this margin on top of it
# is the caller's net for a callee that can no longer answer at all.
DEADLINE_MARGIN = 2.0


class Session(ToolCalls, ResourceCalls, CachedCalls, ModernCalls, InputRounds, Lifecycle, ClientView, WorkflowCalls,
              pykka.ThreadingActor):
    """Owns one downstream client: its capabilities and protocol version, the one table of the
    calls it owes answers to (actors/downstream/calls.py: forwarded, core tools, workflow runs,
    cache lookups, waits for start-up or a restarted server, input rounds; each with the
    Session's own deadline, each answered once by `_answer`), the server requests relayed to it,
    its log level, its resource subscriptions and its open subscriptions/listen streams; reads the
    catalogue and the server directory with no actor hop. Request handlers come by family from
    ToolCalls, ResourceCalls, ModernCalls, InputRounds and Lifecycle (no state of their own); the
    server requests relayed to the client, its subscriptions and its listen streams are held
    objects (ClientRequests, ClientSubscriptions, Listens) that only this actor's greenlet touches.
    A modern (2026-07-28) request is served from its own _meta alone: nothing of it is kept here.

    A handler that raises answers its own call with an internal error and the Session goes on; if
    the Session fails anyway, every call it holds is answered at once (`on_failure`) and the
    front's `on_failed` hook is told, so no client waits out a front's timeout.

    Receives ClientMessage and ClientGone (from the serve front); ForwardReplied, ForwardExpired,
    Progressed, CallDone, CallNotice, ServerBack, Settled, AnswerOverdue, InputAnswered, ParkExpired
    and CacheAnswered (the answers, deadlines, progress and waits of its own calls, the deadlines
    of requests relayed to the client, and the rounds of calls that need the client's input);
    CatalogueUpdated, ServerLogged, ResourceUpdated and WorkflowsChanged (from the bus); ServerRequest,
    ServerRequestCancelled and ListenSubscribed (from a Connection). Sends Forward and CancelForward
    to Connections, LookUp and Store to the CacheKeeper, SetSessionLogLevel to the Supervisor and
    NotifyUpstream to every Connection (both through Runtime), and its answers and notifications
    to the client through its sinks.
    """

    def __init__(self, runtime, notify=None, key: str | None = None, mode: str | None = None, client=None,
                 on_failed=None) -> None:
        super().__init__()
        self.rt = runtime
        self._init_view(client)  # its client (serve.clients) and that client's profile: what it may see
        self.key = key or f"s{next(_session_ids)}"
        self.notify = notify  # sink for unsolicited messages (list_changed); None = cannot receive
        self.on_failed = on_failed  # the front's hook: told (any greenlet) when this Session failed
        self.client_caps: dict = {}
        self.client_info: dict = {}
        self.protocol_version = mcp.LATEST
        self.initialized = False
        self.mode = mode or runtime.config.serve.mode
        me = self.actor_ref  # timers reach this Session through its own mailbox
        self.calls = CallTable(lambda token: _tell(me, ForwardExpired(token)))
        self.client_requests = ClientRequests(lambda our_id: _tell(me, AnswerOverdue(our_id)))
        self.subscriptions = ClientSubscriptions(self._unsubscribe_upstream)
        self.listens = Listens(self._listen_unsubscriber)
        self._after_wait = False
        self.log_level: str | None = None  # set by logging/setLevel; None = relay no logs
        self._served_version = {"tools": -1, "resources": -1, "prompts": -1}  # last catalogue shown per list

    def on_start(self) -> None:
        assert self.rt.bus is not None  # sessions start on a started runtime, whose bus stays
        self.rt.bus.subscribe(self.key, self._on_event, ("ToolsChanged", "ServerLogged", "ResourceUpdated",
                                                         "WorkflowsChanged"))

    def on_stop(self) -> None:
        self._depart("the client went away", "client disconnected")

    def on_failure(self, exc_type, exc_value, traceback) -> None:
        # pykka skips on_stop after a crash: every call held is answered now (not cancelled: its
        # client is still there and waits), then everything else is released as on_stop does.
        why = f"troupe internal error: session {self.key} failed ({exc_type.__name__ if exc_type else 'error'})"
        logger.error("session {} failed: {}: {}", self.key, exc_type.__name__ if exc_type else "?", exc_value)
        for call in self.calls.close(why):
            if call.sink is not None:
                _deliver(call.sink, jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR, why))
            if call.phase == FORWARDED and call.ref is not None:
                _tell(call.ref, CancelForward(self.actor_ref, call.token, why))
        self._depart(why, why)
        if self.on_failed is not None:
            try:
                self.on_failed(why)
            except Exception:  # the front's hook must not hide the failure it reports
                logger.exception("session {}: the front's failure hook failed", self.key)

    def _depart(self, to_servers: str, to_calls: str) -> None:
        """Release everything this client held: the servers' questions to it are answered, its
        calls cancelled upstream, its subscriptions and streams ended. Each step guarded: one
        failing must not keep the others from running."""
        for step in (lambda: self.rt.bus.unsubscribe(self.key) if self.rt.bus is not None else None,
                     lambda: self.client_requests.close(to_servers),
                     lambda: self._release_rounds(to_servers),
                     lambda: self._cancel_all(to_calls),
                     lambda: self.rt.set_log_level(self.actor_ref, None),
                     lambda: self.rt.client_left(self.actor_ref),  # its own upstreams (share: per_client) stop with it
                     self.subscriptions.close,
                     self.listens.close):  # each listen stream answered: it ended with its client
            try:
                step()
            except Exception:
                logger.exception("session {}: releasing its state failed", self.key)

    def _on_event(self, event) -> None:  # runs in the bus greenlet: only a tell
        if event.kind == "ToolsChanged":
            _tell(self.actor_ref, CatalogueUpdated(event.lists, event.version))
        else:
            _tell(self.actor_ref, event)

    # ---------------------------------------------------------------- dispatch

    def on_receive(self, message):
        try:
            self._dispatch(message)
        except Exception as exc:  # one message's bug must not take the client's other calls down
            self._contain(message, exc)

    def _contain(self, message, exc: Exception) -> None:
        """A handler raised: the call the message was about (if any) is answered with an internal
        error naming troupe, and the Session goes on serving its other calls."""
        logger.opt(exception=exc).error("session {}: handling {} failed", self.key, type(message).__name__)
        why = f"troupe internal error: {type(exc).__name__}: {exc}"
        token = getattr(message, "token", getattr(message, "lookup", None))
        if isinstance(token, int):
            call = self.calls.stop(token, why)
            if call is not None and call.sink is not None:
                _deliver(call.sink, jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR, why))
            return
        if isinstance(message, ClientMessage) and isinstance(message.message, dict):
            rid = message.message.get("id")
            if "method" in message.message and isinstance(rid, (str, int)) and not isinstance(rid, bool):
                call = self.calls.get(rid)
                if call is not None:  # accepted before it failed: answered through the table
                    self.calls.stop(call.token, why)
                _deliver(message.sink, jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, why))

    def _dispatch(self, message) -> None:
        match message:
            case ClientMessage(message=msg, sink=sink, principal=principal):
                self._client_message(msg, sink, principal or self.key)
            case ForwardReplied(token=token, outcome=outcome):
                self._settle(token, outcome)
            case Progressed(token=token, params=params):
                call = self.calls.current(token)
                if call is not None and call.sink is not None and call.progress_token is not None:
                    call.sink(progress_notice(call.progress_token, params))
            case ForwardExpired(token=token):
                self._expire(token)
            case CallDone():
                self._answer(message.token, message.outcome, shaped=message.answered)
            case CallNotice(token=token, message=notice):
                call = self.calls.current(token)
                if call is not None and call.sink is not None:
                    call.sink(notice)
            case Settled(token=token):
                self._settled(token)
            case ServerBack(token=token):
                self._server_back(token)
            case CatalogueUpdated(lists=lists, version=version):
                lists = self.changed_in_view(lists)  # a change this client cannot see is no news to it
                self._list_changed(lists, version)
                self.listens.list_changed([k for k in lists if not (k == "tools" and self.mode == "meta")])
            case ListenSubscribed():
                self.listens.subscribed(message)
            case CacheAnswered():
                self._cache_answered(message)
            case InputAnswered():
                self._input_answered(message)
            case ParkExpired():
                self._park_expired(message)
            case ServerRequest():
                self._server_request(message)
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

    def _server_request(self, req: ServerRequest) -> None:
        """A server asks this client something (the Connection found this client's call behind
        it): on that call's own stream, as input_required for a modern one, or on the client's
        own stream once that call is over."""
        if self._refuse_undeclared(req):
            return
        call = self.calls.current(req.origin_request)
        if call is not None and (call.parked or modern.envelope_of(call.sink) is not None):
            self._park(call, req)  # a modern client takes no requests: it hears input_required
            return
        self.client_requests.send(req, self.client_caps, call.sink if call is not None else self.notify)

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
                sink(jsonrpc.error(_usable(msg.get("id")), jsonrpc.INVALID_REQUEST, "not a JSON-RPC 2.0 request"))
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
                sink(jsonrpc.error(_usable(msg.get("id")), jsonrpc.INVALID_REQUEST,
                                   "message has no method, result or error"))
            return
        if "id" not in msg:
            self._notification(method, msg.get("params") or {})
            return
        if _usable(msg["id"]) is None:
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
            self._cancel(rid, str(params.get("reason") or "cancelled by client"))

    def _cancel(self, rid, reason: str) -> None:
        """The client cancelled request `rid`: it gets no answer, its work stops (a forwarded call
        is cancelled upstream; a retry, lookup or wait is never sent), nothing is retried for it."""
        call = self.calls.withdraw(rid, reason)
        if call is None:
            return
        if call.phase == FORWARDED and call.ref is not None:
            _tell(call.ref, CancelForward(self.actor_ref, call.token, reason))
        withdrawn(call)

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
            call = self.calls.get(rid)
            if call is not None:
                self.calls.stop(call.token, "troupe internal error")
            sink(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"troupe internal error in {method}: {exc}"))

    # ---------------------------------------------------------------- the one answer

    def _answer(self, token: int, outcome, shaped: bool = False) -> None:
        """The one answer of call `token` (nothing if it was answered, cancelled or withdrawn):
        `outcome` shaped by the call's shape, or already a whole answer (`shaped`)."""
        call = self.calls.settle(token)
        if call is None or call.sink is None:
            return
        if shaped:
            answer = outcome
        else:
            try:
                answer = call.shape(call.rid, outcome)
            except Exception as exc:  # a bad outcome fails its own call, never the Session
                logger.opt(exception=exc).error("session {}: shaping the answer of {} failed", self.key,
                                                call.method or "a call")
                answer = jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR,
                                       f"troupe internal error answering {call.method or 'the call'}: {exc}")
        call.sink(answer)

    def _track(self, rid, sink, shape, work, deadline: float, stop_with=None, method: str = "") -> int:
        """Accept a call troupe answers itself: `work(token)` runs in a greenlet of its own (a core
        tool, a workflow run) and ends by telling CallDone; a cancel or the client's leaving stops it."""
        call = self.calls.open(rid, sink, shape, LOCAL, deadline)
        call.method, call.stop_with = method, stop_with
        call.work = gevent.spawn(work, call.token)
        return call.token

    def _paged(self, rid, params, sink, items, key, cat, variant=()) -> None:
        """One page of `items` (cut from snapshot `cat`; `variant` names what else shaped them),
        its cursor a digest of their content: any instance with the same catalogue continues it."""
        digest = cat.derived(("cursor", key, variant), lambda: content_digest(items))
        try:
            sink(jsonrpc.result(rid, page(items, params, key, digest)))
        except BadCursor as exc:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, str(exc)))

    def _starting_up(self) -> bool:
        return not self._after_wait and not self.rt.settled.is_set()

    def _defer(self, msg, sink) -> None:
        """Answer once every auto-start server is ready or failed, bounded by startup_wait: the
        request waits in the call table (a cancel withdraws it), then is handled again."""
        settled, wait = self.rt.settled, self.rt.config.serve.startup_wait
        call = self.calls.open(msg["id"], sink, None, SETTLING, wait)
        call.message, call.method = msg, str(msg.get("method"))
        call.principal = getattr(sink, "principal", "") or self.key  # a modern request's own, kept on its sink
        me, token = self.actor_ref, call.token

        def later(_token) -> None:
            settled.wait(timeout=wait)
            _tell(me, Settled(token))
        call.work = gevent.spawn(later, token)

    def _settled(self, token: int) -> None:
        """Start-up settled (or its wait ran out): the deferred request is handled now."""
        call = self.calls.settle(token)
        if call is None or call.sink is None:
            return  # cancelled while it waited
        self._after_wait = True
        try:
            self._request(call.message, call.sink, call.principal)
        finally:
            self._after_wait = False

    def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                 retry: bool | None = None) -> None:
        """Accept a call for the owning connection; `shape(rid, outcome)` builds its one answer.

        An idempotent read whose connection died under it is sent once more when the
        server is back (bounded, and in the table: a cancel stops it); a tools/call only when
        `retry` says so.
        """
        if isinstance(sink, modern.ModernSink) and sink.retry is not None:  # a modern client's next round
            continued = self._continue_round(rid, server, method, params, sink, shape)
            if continued is None:
                return
            params = continued
        call = self.calls.open(rid, sink, shape, FORWARDED, self.rt.server_timeout(server) + DEADLINE_MARGIN)
        call.server, call.method, call.params, call.progress_token = server, method, params, progress_token
        call.retry = method in IDEMPOTENT_METHODS if retry is None else retry
        self._send(call)

    def _send(self, call) -> None:
        """Send `call` to its server's Connection now (answered at once when there is none)."""
        server, token, me = call.server, call.token, self.actor_ref
        ref, status = self._connection(server, call.sink)
        if ref is None:
            self._answer(token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, status, server=server))
            return
        call.phase, call.ref = FORWARDED, ref

        def on_reply(outcome) -> None:  # runs in the connection's greenlet: a tell, nothing else
            _tell(me, ForwardReplied(token, outcome))

        def on_progress(params: dict) -> None:  # the same: progress reaches the client through this mailbox
            _tell(me, Progressed(token, params))
        sink = call.sink
        if not _tell(ref, Forward(call.method, call.params, on_reply,
                                  on_progress=on_progress if call.progress_token is not None else None,
                                  origin=me, origin_request=token,
                                  client_capabilities=self._relayed_capabilities(sink),
                                  log_level=self._relayed_log_level(sink), client=self.client_name)):
            self._settle(token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {server} went away",
                                              server=server, link_lost=True))

    def _connection(self, server: str, sink) -> tuple:
        """(the Connection a call of this client to `server` goes to, or None; why not). For a
        `share: per_client` server it is this client's own upstream (an anonymous stateless caller
        has none). Reads published snapshots only: any greenlet may ask."""
        return self.rt.connection_or_status(server, self.actor_ref,
                                            self.client_name is None and isinstance(sink, modern.ModernSink))

    def _settle(self, token: int, outcome) -> None:
        """A Connection's answer to call `token`: its one answer, or its next input round, or (its
        link lost under an idempotent call) a wait for the server to come back."""
        call = self.calls.current(token)
        if call is None or call.phase != FORWARDED:
            return  # cancelled, expired, or a late answer of a Connection it no longer waits for
        if call.parked:  # it ended while its client was away: kept for the retry (InputRounds)
            assert call.rounds is not None  # only a call with rounds is parked
            call.rounds.outcome = outcome
            return
        if modern.input_required(outcome):
            self._input_required(call, outcome)
            return
        if call.retry and isinstance(outcome, UpstreamError) and outcome.link_lost:
            self._await_server(call, outcome)
            return
        self._answer(token, outcome)

    def _await_server(self, call, failure: UpstreamError) -> None:
        """The Connection died under an idempotent call: it waits in the table (RETRY_WAIT at
        most) for the server's next Connection, then goes to it once."""
        dead, me, token = call.ref, self.actor_ref, call.token
        call.phase, call.ref, call.failure, call.retry = BACK, None, failure, False
        self.calls.rearm(call, RETRY_WAIT)
        server, sink = call.server, call.sink
        call.work = gevent.spawn(wait_for_server, lambda: self._connection(server, sink)[0], dead,
                                 lambda: _tell(me, ServerBack(token)))

    def _server_back(self, token: int) -> None:
        call = self.calls.current(token)
        if call is None or call.phase != BACK:
            return  # cancelled (or expired) while it waited: never sent again
        call.work = None
        self.calls.rearm(call, self.rt.server_timeout(call.server) + DEADLINE_MARGIN)
        self._send(call)

    def _expire(self, token: int) -> None:
        """The Session's deadline for call `token` passed: whatever it waited for, it is answered now."""
        call = self.calls.current(token)
        if call is None or call.parked:
            return
        if call.phase == LOOKUP:  # the cache was too slow: the call goes on without it
            self._cache_answered(CacheAnswered(token, None))
            return
        if call.phase == SETTLING:  # start-up took longer than startup_wait: answer with what there is
            self._settled(token)
            return
        if call.phase == FORWARDED:
            waited = self.rt.server_timeout(call.server) + DEADLINE_MARGIN
            _tell(call.ref, CancelForward(self.actor_ref, token, "troupe's deadline passed"))
            outcome = UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"server {call.server} gave no answer within {waited:g}s",
                                    server=call.server)
        elif call.phase == BACK:
            failure = call.failure
            outcome = UpstreamError(failure.code, f"{failure.message} (and it was not back within {RETRY_WAIT:g}s)",
                                    failure.data, server=call.server)
        else:  # LOCAL: troupe's own work overran
            outcome = UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"troupe gave no answer to {call.method or 'the call'} "
                                    "in time", server="troupe")
        self.calls.stop(token, "troupe's deadline passed")  # its work stopped; answered here, once
        if call.sink is not None:
            try:
                answer = call.shape(call.rid, outcome)
            except Exception:
                answer = jsonrpc.error(call.rid, outcome.code, outcome.message)
            call.sink(answer)

    # ---------------------------------------------------------------- notifications out

    def _unsubscribe_upstream(self, server: str, uri: str) -> None:
        """The connection counts followers: upstream hears unsubscribe when the last one leaves."""
        ref = self.rt.connection(server)
        if ref is not None:  # a new generation of it never heard of this subscription: a dead one is fine
            _tell(ref, Forward("resources/unsubscribe", {"uri": uri}, ignore, origin=self.actor_ref))

    def _cancel_all(self, reason: str) -> None:
        refs = set()
        for call in self.calls.close(reason):
            if call.phase == FORWARDED and call.ref is not None:
                refs.add(call.ref)
        for ref in refs:
            _tell(ref, CancelForward(self.actor_ref, None, reason))


def _usable(rid):
    """A request id troupe may echo: a string or an integer (never a bool, a float, null or a container)."""
    return rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None


def _deliver(sink, message: dict) -> None:
    try:
        sink(message)
    except Exception:  # a front that cannot take an answer must not stop the others from theirs
        logger.exception("an answer could not be delivered")


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
