"""Session actor: one downstream MCP client; routes its requests, answers exactly once."""
from __future__ import annotations

import itertools
from typing import Any

import gevent
import pykka
from loguru import logger

from actors.downstream import coretools, metatools
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
from actors.protocol import jsonrpc, mcp, validation
from actors.downstream.forwarding import IDEMPOTENT_METHODS, Retry, progress_relay, retry_when_back
from actors.downstream.metacalls import MetaCalls
from actors.downstream.relaying import RelayHandlers
from actors.tells import tell as _tell
from actors.downstream.replies import BadCursor, page, passthrough, restore_uris, tool_outcome

LIST_CHANGED_NOTICE = {"tools": "notifications/tools/list_changed",
                       "resources": "notifications/resources/list_changed",
                       "prompts": "notifications/prompts/list_changed"}
_session_ids = itertools.count(1)
BATCH_VERSION = "2025-03-26"  # the only protocol version with JSON-RPC batches
# The connection's own timeout answers first (and cancels upstream); this margin on top of it
# is the caller's net for a callee that can no longer answer at all.
DEADLINE_MARGIN = 2.0


class _Call:
    """One forwarded request this Session owes exactly one answer to."""

    __slots__ = ("server", "sink", "shape", "token", "ref", "retry", "timer")

    def __init__(self, server, sink, shape, token, ref, retry):
        self.server, self.sink, self.shape, self.token, self.ref, self.retry = server, sink, shape, token, ref, retry
        self.timer: gevent.Greenlet | None = None


class _Deferred:
    """A tools/list that waited for start-up to settle, now due."""

    __slots__ = ("message", "sink")

    def __init__(self, message, sink):
        self.message, self.sink = message, sink


class Session(MetaCalls, RelayHandlers, pykka.ThreadingActor):
    """Owns one downstream client: its capabilities and protocol version, the calls it awaits
    (each with its own deadline), the server requests relayed to it, its log level and its
    resource subscriptions; reads the catalogue and the server directory with no actor hop.

    Receives ClientMessage and ClientGone (from the serve front); ForwardReplied, ForwardExpired,
    Retry and _Deferred (answers, deadlines, retries and start-up waits of its own calls);
    CatalogueUpdated, ServerLogged and ResourceUpdated (from the bus); ServerRequest and
    ServerRequestCancelled (from a Connection). Sends Forward and CancelForward to Connections,
    SetSessionLogLevel to the Supervisor and NotifyUpstream to every Connection (both through
    Runtime), and its answers and notifications to the client through its sinks.
    """

    def __init__(self, runtime, notify=None, key: str | None = None, mode: str | None = None) -> None:
        super().__init__()
        self.rt = runtime
        self.key = key or f"s{next(_session_ids)}"
        self.notify = notify  # sink for unsolicited messages (list_changed); None = cannot receive
        self.client_caps: dict = {}
        self.client_info: dict = {}
        self.protocol_version = mcp.LATEST
        self.initialized = False
        self.mode = mode or runtime.config.serve.mode
        # client request id → _Call: a cancellation reaches the right upstream, a server→client
        # request triggered by that call travels on the call's own stream, and the deadline
        # this Session owns answers it if nothing else does
        self._inflight: dict[Any, _Call] = {}
        self._tokens = itertools.count(1)
        self._outgoing: dict[str, tuple] = {}  # our request id → (on_reply, server, upstream id)
        self._outgoing_ids = itertools.count(1)
        self._after_wait = False
        self.log_level: str | None = None  # set by logging/setLevel; None = relay no logs
        self._subscribed: dict[tuple[str, str], str] = {}  # (server, upstream uri) → URI the client used
        self._served_version = {"tools": -1, "resources": -1, "prompts": -1}  # last catalogue shown per list

    def on_start(self) -> None:
        assert self.rt.bus is not None  # sessions start on a started runtime, whose bus stays
        self.rt.bus.subscribe(self.key, self._on_event, ("ToolsChanged", "ServerLogged", "ResourceUpdated"))

    def on_stop(self) -> None:
        assert self.rt.bus is not None  # set before on_start, never cleared
        self.rt.bus.unsubscribe(self.key)
        outgoing, self._outgoing = self._outgoing, {}
        for on_reply, server, _ in outgoing.values():  # the upstream must not wait for a gone client
            on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, "the client went away", server=server))
        self._cancel_all("client disconnected")
        self.rt.set_log_level(self.actor_ref, None)
        for server, uri in list(self._subscribed):
            self._drop_subscription(server, uri)

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
            case ClientMessage(message=msg, sink=sink):
                self._client_message(msg, sink)
            case _Deferred(message=msg, sink=sink):
                self._after_wait = True  # start-up wait is over (settled or timed out): answer now
                try:
                    self._request(msg, sink)
                finally:
                    self._after_wait = False
            case CatalogueUpdated(lists=lists, version=version):
                self._list_changed(lists, version)
            case ForwardReplied(rid=rid, token=token, outcome=outcome):
                self._settle(rid, token, outcome)
            case ForwardExpired(rid=rid, token=token):
                self._expire(rid, token)
            case Retry():
                self._forward(message.rid, message.server, message.method, message.params, message.sink,
                              message.shape, message.token, retry=False)
            case ServerRequest():
                self._server_request(message)
            case ServerRequestCancelled(server=server, upstream_id=uid):
                for our_id, (_, srv, up) in list(self._outgoing.items()):
                    if srv == server and up == uid:
                        del self._outgoing[our_id]
                        if self.notify is not None:
                            self.notify(jsonrpc.notification("notifications/cancelled", {"requestId": our_id}))
            case ServerLogged():
                self._relay_log(message)
            case ResourceUpdated(server=server, uri=uri):
                exposed = self._subscribed.get((server, uri))
                if exposed is not None and self.notify is not None:
                    self.notify(jsonrpc.notification("notifications/resources/updated", {"uri": exposed}))
            case ClientGone(reason=reason):
                self._cancel_all(reason)
                self.actor_ref.stop(block=False)
            case _:
                logger.warning("session: unknown message {!r}", message)

    def _client_message(self, msg, sink) -> None:
        if isinstance(msg, list) and msg and self.protocol_version == BATCH_VERSION:
            self._batch(msg, sink)
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
                self._client_response(msg)
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
        self._request(msg, sink)

    def _batch(self, batch: list, sink) -> None:
        """2025-03-26 batches: every entry handled as if sent alone, the answers sent as one array."""
        # Entries that get an answer: anything but a notification or a response from the client.
        expected = sum(1 for m in batch if not (isinstance(m, dict) and (
            ("method" in m and "id" not in m) or ("method" not in m and ("result" in m or "error" in m)))))
        answers: list = []

        def collect(message: dict) -> None:  # any greenlet: answers gathered, the rest passed on
            if "method" in message:
                sink(message)
                return
            answers.append(message)
            if len(answers) == expected:
                sink(answers)
        for m in batch:
            if isinstance(m, dict) and m.get("method") == "initialize":
                collect(jsonrpc.error(m.get("id"), jsonrpc.INVALID_REQUEST, "initialize must not be batched"))
            else:
                self._client_message(m, collect if expected else sink)

    def _notification(self, method: str, params: dict) -> None:
        if method == "notifications/initialized":
            self.initialized = True
        elif method == "notifications/roots/list_changed":
            self.rt.notify_upstreams("notifications/roots/list_changed")
        elif method == "notifications/cancelled":
            rid = params.get("requestId")
            call = self._inflight.pop(rid, None) if isinstance(rid, (str, int)) else None
            if call is not None:  # no answer is owed any more
                _kill(call.timer)
                _tell(call.ref, CancelForward(self.actor_ref, rid, str(params.get("reason") or "cancelled by client")))

    def _request(self, msg: dict, sink) -> None:
        rid, method = msg["id"], msg["method"]
        params = msg.get("params")
        if params is None:
            params = {}
        if not isinstance(params, dict):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "params must be an object"))
            return
        handler = _METHODS.get(method)
        if handler is None:
            sink(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        try:
            handler(self, rid, params, sink, msg)
        except Exception as exc:  # a bug answers this request; it must not kill the session
            logger.exception("session: {} failed", method)
            sink(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"troupe internal error in {method}: {exc}"))

    # ---------------------------------------------------------------- lifecycle methods

    def _initialize(self, rid, params, sink, msg) -> None:
        self.client_caps = params.get("capabilities") or {}
        self.client_info = params.get("clientInfo") or {}
        self.protocol_version = mcp.negotiate(params.get("protocolVersion"))
        sink(jsonrpc.result(rid, {
            "protocolVersion": self.protocol_version,
            "capabilities": {"tools": {"listChanged": True},
                             "resources": {"listChanged": True, "subscribe": True},
                             "prompts": {"listChanged": True},
                             "logging": {},
                             "completions": {}},
            "serverInfo": mcp.SERVER_INFO,
            "instructions": self._instructions()}))

    def _instructions(self) -> str:
        if self.mode == "meta":
            return ("troupe aggregates many MCP servers. Find tools with filter_tools or list_tools, read one's "
                    "schema with describe_tool, then run it with call_tool {name, arguments}.")
        return "troupe aggregates many MCP servers; tool names are <server>__<tool>."

    def _ping(self, rid, params, sink, msg) -> None:
        sink(jsonrpc.result(rid, {}))

    # ---------------------------------------------------------------- tools

    def _tools_list(self, rid, params, sink, msg) -> None:
        if self._starting_up():
            self._defer(msg, sink)
            return
        cat = self.rt.catalogue()
        self._served_version["tools"] = cat.version
        tools = list(metatools.META_TOOLS) if self.mode == "meta" else list(cat.tool_list)
        tools += coretools.listed(self.rt.config.serve.client_admin)
        self._paged(rid, params, sink, tools, "tools", cat.version)

    def _paged(self, rid, params, sink, items, key, version) -> None:
        try:
            sink(jsonrpc.result(rid, page(items, params, key, version)))
        except BadCursor as exc:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, str(exc)))

    def _starting_up(self) -> bool:
        return not self._after_wait and not self.rt.settled.is_set()

    def _defer(self, msg, sink) -> None:
        """Answer once every auto-start server is ready or failed, bounded by startup_wait."""
        ref, settled, wait = self.actor_ref, self.rt.settled, self.rt.config.serve.startup_wait

        def later():
            settled.wait(timeout=wait)
            try:
                ref.tell(_Deferred(msg, sink))
            except pykka.ActorDeadError:
                pass
        gevent.spawn(later)

    def _tools_call(self, rid, params, sink, msg) -> None:
        name, args = params.get("name"), params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(name, str):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "tools/call needs a tool name"))
            return
        if not isinstance(args, dict):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"arguments of {name} must be an object"))
            return
        if name in coretools.CORE_NAMES:
            rt = self.rt
            gevent.spawn(lambda: sink(jsonrpc.result(rid, coretools.run(name, args, rt))))
            return
        cat = self.rt.catalogue()
        if self.mode == "meta" and name in metatools.META_NAMES:
            self._meta(rid, name, args, params, sink, cat, msg)
            return
        entry = cat.tool(name) if self.mode == "flat" else None
        held = cat.withheld_tool(name) if entry is None and self.mode == "flat" else None
        if held is not None:  # never passed through: the changed definition is exactly what waits
            sink(jsonrpc.result(rid, metatools.text_result(held.message(), is_error=True)))
            return
        if entry is None and self._starting_up():
            self._defer(msg, sink)  # its server may still be starting
            return
        bare = self.rt.passthrough_server() if entry is None and self.mode == "flat" else None
        if bare is not None:
            self._forward(rid, bare, "tools/call", params, sink, passthrough())
            return
        if entry is None:
            hint = "list_tools or filter_tools" if self.mode == "meta" else "tools/list"
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"unknown tool: {name} (see {hint})"))
            return
        self._call(rid, entry, args, params, sink)

    def _call(self, rid, entry, args, params, sink) -> None:
        problem = validation.problems(self.rt.catalogue().validator(entry), args)
        if problem is not None:  # caught here, the model gets a precise reason and no server is bothered
            sink(jsonrpc.result(rid, metatools.text_result(
                f"invalid arguments for {entry.name}: {problem}. describe_tool shows its schema."
                if self.mode == "meta" else f"invalid arguments for {entry.name}: {problem}", is_error=True)))
            return
        upstream = {"name": entry.original, "arguments": args}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(meta, dict):
            upstream["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
        retry = bool((entry.definition.get("annotations") or {}).get("idempotentHint")) and \
            self.rt.retry_tools(entry.server)
        self._forward(rid, entry.server, "tools/call", upstream, sink, tool_outcome, token, retry=retry)

    def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                 retry: bool | None = None) -> None:
        """Send to the owning connection; `shape(rid, outcome)` builds the one answer.

        An idempotent read whose connection died under it is sent once more when the
        server is back (bounded); a tools/call only when `retry` says so.
        """
        ref, status = self.rt.connection_or_status(server)
        if ref is None:
            sink(shape(rid, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, status, server=server)))
            return
        if retry is None:
            retry = method in IDEMPOTENT_METHODS
        token = next(self._tokens)
        me = self.actor_ref

        def on_reply(outcome) -> None:  # runs in the connection's greenlet: a tell, nothing else
            _tell(me, ForwardReplied(rid, token, outcome))

        again = Retry(rid, server, method, params, sink, shape, progress_token) if retry else None
        call = self._inflight[rid] = _Call(server, sink, shape, token, ref, again)
        call.timer = gevent.spawn_later(self.rt.server_timeout(server) + DEADLINE_MARGIN,
                                        _tell, me, ForwardExpired(rid, token))
        on_progress = progress_relay(progress_token, sink) if progress_token is not None else None
        if not _tell(ref, Forward(method, params, on_reply, on_progress=on_progress, origin=self.actor_ref,
                                  origin_request=rid)):
            self._settle(rid, token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {server} went away",
                                                   server=server, link_lost=True))

    def _settle(self, rid, token: int, outcome) -> None:
        """The one answer to a forwarded request (or its retry once the server is back)."""
        call = self._inflight.get(rid)
        if call is None or call.token != token:
            return  # cancelled, expired, or an answer to an earlier request that used this id
        del self._inflight[rid]
        _kill(call.timer)
        if call.retry is not None and isinstance(outcome, UpstreamError) and outcome.link_lost:
            gevent.spawn(retry_when_back, self.rt, self.actor_ref, call.server, call.ref, outcome, call.retry)
            return
        call.sink(call.shape(rid, outcome))

    def _expire(self, rid, token: int) -> None:
        call = self._inflight.get(rid)
        if call is None or call.token != token:
            return
        waited = self.rt.server_timeout(call.server) + DEADLINE_MARGIN
        _tell(call.ref, CancelForward(self.actor_ref, rid, "troupe's deadline passed"))
        self._settle(rid, token, UpstreamError(
            jsonrpc.REQUEST_TIMEOUT, f"server {call.server} gave no answer within {waited:g}s", server=call.server))

    # ---------------------------------------------------------------- resources and prompts

    def _resources_list(self, rid, params, sink, msg) -> None:
        cat = self.rt.catalogue()
        self._served_version["resources"] = cat.version
        self._paged(rid, params, sink, [dict(r.definition) for r in cat.resources], "resources", cat.version)

    def _templates_list(self, rid, params, sink, msg) -> None:
        cat = self.rt.catalogue()
        self._paged(rid, params, sink, [dict(t.definition) for t in cat.templates], "resourceTemplates",
                    cat.version)

    def _resources_read(self, rid, params, sink, msg) -> None:
        uri = params.get("uri")
        owner = self._owner_or_not_found(rid, uri, sink)
        if owner is None:
            return
        server, original = owner
        self._forward(rid, server, "resources/read", {**params, "uri": original}, sink,
                      passthrough(lambda r: restore_uris(r, original, uri)))

    def _prompts_list(self, rid, params, sink, msg) -> None:
        cat = self.rt.catalogue()
        self._served_version["prompts"] = cat.version
        self._paged(rid, params, sink, [dict(p.definition) for p in cat.prompts], "prompts", cat.version)

    def _prompts_get(self, rid, params, sink, msg) -> None:
        name = params.get("name")
        cat = self.rt.catalogue()
        entry = cat.prompt(name) if isinstance(name, str) else None
        held = cat.withheld_prompt(name) if entry is None and isinstance(name, str) else None
        if held is not None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, held.message()))
            return
        if entry is None and isinstance(name, str) and (bare := self.rt.passthrough_server()) is not None:
            self._forward(rid, bare, "prompts/get", params, sink, passthrough())
            return
        if entry is None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"unknown prompt: {name}"))
            return
        self._forward(rid, entry.server, "prompts/get", {**params, "name": entry.original}, sink, passthrough())

    def _discover(self, rid, params, sink, msg) -> None:
        # The stateless 2026-07-28 era is not served yet: clients fall back to initialize.
        sink(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, "method not found: server/discover"))

    # ---------------------------------------------------------------- notifications out

    def _list_changed(self, lists, version: int) -> None:
        if self.notify is None or not self.initialized:
            return
        for kind in ("tools", "resources", "prompts"):
            if kind not in lists or (kind == "tools" and self.mode == "meta"):
                continue  # meta mode's tool list never changes
            if self._served_version[kind] >= version:
                continue  # this client already saw that catalogue
            self.notify(jsonrpc.notification(LIST_CHANGED_NOTICE[kind]))

    def _cancel_all(self, reason: str) -> None:
        calls, self._inflight = list(self._inflight.values()), {}
        for call in calls:
            _kill(call.timer)
        for ref in {call.ref for call in calls}:
            _tell(ref, CancelForward(self.actor_ref, None, reason))


def _kill(timer) -> None:
    if timer is not None:
        timer.kill(block=False)


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
}
