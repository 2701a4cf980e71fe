"""Session actor: one downstream MCP client; routes its requests, answers exactly once."""
from __future__ import annotations

import itertools

import pykka
from loguru import logger

from actors.caching.messages import CacheAnswered
from actors.caching.session_side import CacheSide
from actors.downstream.batches import serve_batch
from actors.downstream.calls import CallDone, CallNotice, CallTable, Progressed, ServerBack, Settled
from actors.downstream.client_requests import AnswerOverdue, ClientRequests
from actors.downstream.client_subscriptions import ClientSubscriptions
from actors.downstream.client_view import ClientView
from actors.downstream.forwarder import DEADLINE_MARGIN, Forwarder
from actors.downstream.input_rounds import InputAnswered, InputRounds, ParkExpired
from actors.downstream.lifecycle import Handshake
from actors.downstream.listens import Listens, ListenSubscribed
from actors.downstream.modern_calls import ModernRequests, instructions
from actors.downstream.replies import ignore
from actors.downstream.resource_calls import ResourceRequests
from actors.downstream.tool_calls import ToolRequests
from actors.events.kinds import ResourceUpdated, ServerLogged
from actors.messages import (
    CatalogueUpdated,
    ClientGone,
    ClientMessage,
    Forward,
    ForwardExpired,
    ForwardReplied,
    ServerRequest,
    ServerRequestCancelled,
)
from actors.protocol import jsonrpc, modern
from actors.tasks import wire as task_wire
from actors.tasks.messages import TaskChanged, UnwatchTasks
from actors.tasks.session_side import TaskRequests
from actors.tells import tell as _tell
from actors.workflows.session_calls import WorkflowRequests, WorkflowsChanged

__all__ = ["DEADLINE_MARGIN", "Session"]  # the margin: tests and the relay size their waits by it
_session_ids = itertools.count(1)
BATCH_VERSION = "2025-03-26"  # the only protocol version with JSON-RPC batches


class Session(pykka.ThreadingActor):
    """Owns one downstream client: who it is and what it sees (ClientView), the state its
    handshake negotiated (Handshake), the one table of the calls it owes answers to (CallTable:
    forwarded, core tools, workflow runs, cache lookups, waits for start-up or a restarted server,
    input rounds; each with the Session's own deadline, each answered once by its Forwarder), the
    server requests relayed to it (ClientRequests), its resource subscriptions and its open
    subscriptions/listen streams. The request handlers are objects it owns, each given what it
    uses and nothing more (ToolRequests, ResourceRequests, ModernRequests, WorkflowRequests,
    InputRounds, CacheSide); only this actor's greenlet touches any of them. It reads the
    catalogue and the server directory with no actor hop, through its frozen SessionContext (it
    holds no Runtime). A modern (2026-07-28) request is served from its own _meta alone: nothing
    of it is kept here.

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
    NotifyUpstream to every Connection (both through its context), and its answers and
    notifications to the client through its sinks.
    """

    def __init__(self, runtime, notify=None, key: str | None = None, mode: str | None = None, client=None,
                 on_failed=None) -> None:
        super().__init__()
        ctx = self.ctx = runtime.session_context()  # all a Session may use of the Runtime
        self.key = key or f"s{next(_session_ids)}"
        self.notify = notify  # sink for unsolicited messages (list_changed); None = cannot receive
        self.on_failed = on_failed  # the front's hook: told (any greenlet) when this Session failed
        self.mode = mode = mode or ctx.serve.mode
        me = self.actor_ref  # timers and work reach this Session through its own mailbox
        self.view = view = ClientView(ctx, client)
        self.handshake = handshake = Handshake(ctx, me, mode, view, notify, instructions(mode))
        self.calls = calls = CallTable(lambda token: _tell(me, ForwardExpired(token)))
        self.client_requests = ClientRequests(lambda our_id: _tell(me, AnswerOverdue(our_id)))
        self.subscriptions = ClientSubscriptions(self._unsubscribe_upstream)
        self.listens = Listens(lambda rid: self.modern.listen_unsubscriber(rid))
        self.forwarder = fw = Forwarder(ctx, me, self.key, calls, view, handshake, self._request)
        self.rounds = InputRounds(ctx, me, self.key, calls, self.client_requests, handshake, view, fw)
        self.cache = CacheSide(ctx, me, view, calls, fw)
        fw.rounds = self.rounds  # the Forwarder and these two call each other
        fw.cache_answered = lambda token, found: self.cache.answered(CacheAnswered(token, found))
        self.modern = ModernRequests(ctx, me, mode, view, self.listens, calls, self.rounds, fw,
                                     follow_tasks=lambda ids, sink: self.tasks.followed(ids, sink))
        self.workflows = WorkflowRequests(ctx, me, mode, view, fw)
        self.tasks = TaskRequests(ctx, me, view, handshake, fw)
        self.tools = ToolRequests(ctx, me, mode, view, handshake, fw, self.cache, self.workflows, self.tasks)
        self.resources = ResourceRequests(view, handshake, self.subscriptions, fw, self.cache)
        self.methods = {
            "initialize": handshake.initialize,
            "ping": handshake.ping,
            "logging/setLevel": handshake.set_level,
            "tools/list": self.tools.tools_list,
            "tools/call": self.tools.tools_call,
            "resources/list": self.resources.resources_list,
            "resources/templates/list": self.resources.templates_list,
            "resources/read": self.resources.resources_read,
            "prompts/list": self.resources.prompts_list,
            "prompts/get": self.resources.prompts_get,
            "resources/subscribe": self.resources.subscribe,
            "resources/unsubscribe": self.resources.unsubscribe,
            "completion/complete": self.resources.complete,
            "server/discover": self.modern.discover,
            "subscriptions/listen": self.modern.listen,
            **dict.fromkeys(task_wire.METHODS, self.tasks.request),
        }

    @property
    def client_name(self) -> str | None:
        return self.view.client_name

    def on_start(self) -> None:
        self.ctx.bus.subscribe(self.key, self._on_event, ("ToolsChanged", "ServerLogged", "ResourceUpdated",
                                                          "WorkflowsChanged"))

    def on_stop(self) -> None:
        self._depart("the client went away", "client disconnected")

    def on_failure(self, exc_type, exc_value, traceback) -> None:
        # pykka skips on_stop after a crash: every call held is answered now (not cancelled: its
        # client is still there and waits), then everything else is released as on_stop does.
        why = f"troupe internal error: session {self.key} failed ({exc_type.__name__ if exc_type else 'error'})"
        logger.error("session {} failed: {}: {}", self.key, exc_type.__name__ if exc_type else "?", exc_value)
        self.rounds.release(why)  # before the table empties: the servers' questions parked calls held
        self.forwarder.fail_all(why)
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
        ctx = self.ctx
        for step in (lambda: ctx.bus.unsubscribe(self.key),
                     lambda: self.client_requests.close(to_servers),
                     lambda: self.rounds.release(to_servers),
                     lambda: self.forwarder.cancel_all(to_calls),
                     lambda: ctx.set_log_level(self.actor_ref, None),
                     lambda: ctx.client_left(self.actor_ref),  # its own upstreams (share: per_client) stop with it
                     lambda: self.tasks.watching and _tell(ctx.tasks, UnwatchTasks(self.actor_ref)),
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
            self.forwarder.fail(token, why)
            return
        if isinstance(message, ClientMessage) and isinstance(message.message, dict):
            rid = message.message.get("id")  # it failed before its handler ran (_request answers those)
            if "method" in message.message and isinstance(rid, (str, int)) and not isinstance(rid, bool):
                _deliver(message.sink, jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, why))

    def _dispatch(self, message) -> None:
        match message:
            case ClientMessage(message=msg, sink=sink, principal=principal):
                self._client_message(msg, sink, principal or self.key)
            case ForwardReplied(token=token, outcome=outcome):
                self.forwarder.settle(token, outcome)
            case Progressed(token=token, params=params):
                self.forwarder.progress(token, params)
            case ForwardExpired(token=token):
                self.forwarder.expire(token)
            case CallDone():
                self.forwarder.answer(message.token, message.outcome, shaped=message.answered)
            case CallNotice(token=token, message=notice):
                self.forwarder.notice(token, notice)
            case Settled(token=token):
                self.forwarder.settled(token)
            case ServerBack(token=token):
                self.forwarder.server_back(token)
            case CatalogueUpdated(lists=lists):
                self._lists_changed(lists)
            case ListenSubscribed():
                self.listens.subscribed(message)
            case CacheAnswered():
                self.cache.answered(message)
            case InputAnswered():
                self.rounds.input_answered(message)
            case ParkExpired():
                self.rounds.park_expired(message)
            case ServerRequest():
                self._server_request(message)
            case AnswerOverdue(our_id=our_id):
                self.client_requests.expire(our_id)
            case ServerRequestCancelled(server=server, upstream_id=uid):
                for our_id in self.client_requests.cancelled(server, uid):
                    if self.notify is not None:
                        self.notify(jsonrpc.notification("notifications/cancelled", {"requestId": our_id}))
            case ServerLogged():
                self.handshake.relay_log(message)
                self.modern.relay_log_to_requests(message)
            case ResourceUpdated(server=server, uri=uri):
                self.listens.updated(server, uri)
                exposed = self.subscriptions.exposed_uri(server, uri)
                if exposed is not None and self.notify is not None:
                    self.notify(jsonrpc.notification("notifications/resources/updated", {"uri": exposed}))
            case TaskChanged(task_id=task_id, task=task):
                self._task_changed(task_id, task)
            case WorkflowsChanged(names=names):
                if self.workflows.changed(names):
                    self._lists_changed(["tools"])
            case ClientGone():  # on_stop releases all it held, the servers' questions first
                self.actor_ref.stop(block=False)
            case _:
                logger.warning("session: unknown message {!r}", message)

    def _task_changed(self, task_id: str, task: dict) -> None:
        """A task this client follows changed: its listen streams hear the whole task (SEP-2663);
        a 2025-11-25 session that created it hears notifications/tasks/status."""
        if not self.listens.task_changed(task_id, {**task}) and self.notify is not None and self.handshake.initialized:
            self.notify(jsonrpc.notification(task_wire.LEGACY_NOTIFICATION, task_wire.to_legacy(task)))

    def _server_request(self, req: ServerRequest) -> None:
        """A server asks this client something (the Connection found this client's call behind
        it): on that call's own stream, as input_required for a modern one, or on the client's
        own stream once that call is over."""
        if self.modern.refuse_undeclared(req):
            return
        call = self.calls.current(req.origin_request)
        if call is not None and (call.parked or modern.envelope_of(call.sink) is not None):
            self.rounds.park(call, req)  # a modern client takes no requests: it hears input_required
            return
        self.client_requests.send(req, self.handshake.client_caps, call.sink if call is not None else self.notify)

    def _client_message(self, msg, sink, principal: str) -> None:
        if isinstance(msg, list) and msg and self.handshake.protocol_version == BATCH_VERSION:
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
            self.handshake.initialized = True
        elif method == "notifications/roots/list_changed":
            self.ctx.notify_upstreams("notifications/roots/list_changed")
        elif method == "notifications/cancelled":
            rid = params.get("requestId")
            if self.listens.end(rid):
                return  # a listen stream is over: answered, its resources unfollowed
            self.forwarder.cancel(rid, str(params.get("reason") or "cancelled by client"))

    def _request(self, msg: dict, sink, principal: str) -> None:
        rid, method = msg["id"], msg["method"]
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "params must be an object"))
            return
        if self.ctx.tracing is not None:  # its SERVER span ends with the answer through this sink
            sink = self.ctx.tracing.served(self, rid, method, params, sink)
        if modern.is_modern(params):
            # stateless: served by this request's own _meta alone (it travels with the sink)
            served = self.modern.request(rid, method, params, sink, principal)
            if served is None:
                return
            params, sink = served
        handler = self.methods.get(method)
        if handler is None:
            sink(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        opened = self.calls.last_token  # a call this request opens has a later token
        try:
            handler(rid, params, sink, msg)
        except Exception as exc:  # a bug answers this request; it must not kill the session
            logger.exception("session: {} failed", method)
            why = f"troupe internal error in {method}: {exc}"
            call = self.calls.get(rid)
            if call is not None and call.token > opened:
                self.forwarder.fail(call.token, why)  # answered (and cancelled upstream) through its call
            else:  # it had opened no call (or one answered already is not in the table)
                _deliver(sink, jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, why))

    # ---------------------------------------------------------------- notifications out

    def _lists_changed(self, kinds) -> None:
        """Catalogue lists of these kinds changed: the client hears of each that its view shows
        differently from what it has (list_notices.py), on its session and on its listen
        streams. Meta mode's tool list never changes."""
        cat = self.view.catalogue()
        self.handshake.list_changed(kinds, cat)
        self.listens.list_changed([k for k in kinds if not (k == "tools" and self.mode == "meta")], cat)

    def _unsubscribe_upstream(self, server: str, uri: str) -> None:
        """The connection counts followers: upstream hears unsubscribe when the last one leaves."""
        ref = self.ctx.connection(server)
        if ref is not None:  # a new generation of it never heard of this subscription: a dead one is fine
            _tell(ref, Forward("resources/unsubscribe", {"uri": uri}, ignore, origin=self.actor_ref))


def _usable(rid):
    """A request id troupe may echo: a string or an integer (never a bool, a float, null or a container)."""
    return rid if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None


def _deliver(sink, message: dict) -> None:
    try:
        sink(message)
    except Exception:  # a front that cannot take an answer must not stop the others from theirs
        logger.exception("an answer could not be delivered")
