"""The session's side of the stateless 2026-07-28 revision: accepting a modern request on its own
`_meta`, server/discover, subscriptions/listen streams, and what a modern request's envelope
decides later (the capabilities relayed upstream, the server requests it may receive, its logs)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import gevent

from actors.downstream import waking
from actors.downstream.client_requests import NEEDS
from actors.downstream.listens import Listens, ListenSubscribed
from actors.downstream.replies import ignore
from actors.events.kinds import ServerLogged
from actors.messages import Forward, ServerRequest, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.protocol.request_state import args_digest
from actors.tasks import session_side as task_offer, wire as task_wire
from actors.tells import tell as _tell

if TYPE_CHECKING:
    from actors.downstream.calls import CallTable
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.forwarder import Forwarder
    from actors.downstream.input_rounds import InputRounds


def instructions(mode: str) -> str:
    """What troupe tells a client about itself (initialize and server/discover), by mode."""
    if mode == "meta":
        return ("troupe aggregates many MCP servers. Find tools with filter_tools or list_tools, read one's "
                "schema with describe_tool, then run it with call_tool {name, arguments}; troupe's own core_* "
                "tools (list_core_tools; core_status reports on every server) are run the same way.")
    return "troupe aggregates many MCP servers; tool names are <server>__<tool>."


class ModernRequests:
    """Modern requests and listen streams for one Session. It keeps no state of its own: the
    streams live in the Session's Listens, the envelope of each request travels with its sink
    (modern.ModernSink), and nothing read from one request is kept for the next. A plain object
    used only from its Session's greenlet, with explicit inputs: the context, the Session's ref
    and mode, its client's view, its listen streams, its call table, its input rounds and its
    Forwarder (a listen opened during start-up waits there for it to settle)."""

    def __init__(self, ctx: SessionContext, me, mode: str, view: ClientView, listens: Listens, table: CallTable,
                 rounds: InputRounds, forwarder: Forwarder, follow_tasks=None) -> None:
        self._ctx, self._me, self._mode, self._view = ctx, me, mode, view
        self._listens, self._table, self._rounds, self._fw = listens, table, rounds, forwarder
        # (task ids, sink) → the ones this caller may follow (TaskRequests.followed)
        self._follow_tasks = follow_tasks or (lambda ids, sink: [])

    # ---------------------------------------------------------------- entry

    def request(self, rid, method: str, params: dict, sink, principal: str):
        """(params, sink) to serve a modern request with, or None once it has been refused."""
        refused = modern.check_meta(rid, method, params)
        if refused is not None:
            sink(refused)
            return None
        taken = self._rounds.input_retry(rid, method, params, principal)
        if isinstance(taken, dict):
            sink(taken)
            return None
        clean, retry = taken
        envelope = modern.Envelope(params["_meta"])
        # Lists that differ by who asks (serve.clients) must not be shared by a cache between callers.
        scope = "private" if self._ctx.serve.clients or self._view.profile is not None else "public"
        return modern.without_envelope(clean), modern.finishing_sink(
            rid, method, sink, envelope, principal=principal, digest=args_digest(method, params), retry=retry,
            scope=scope)

    def discover(self, rid, params, sink, msg) -> None:
        # Answered in either era: a client probes with it before it knows which one troupe speaks.
        sink(jsonrpc.result(rid, modern.discover_result(instructions(self._mode), self.tasks_offered())))

    def tasks_offered(self) -> bool:
        return task_offer.offered(self._ctx, self._view.catalogue())

    # ---------------------------------------------------------------- subscriptions/listen

    def listen(self, rid, params, sink, msg) -> None:
        """Acknowledge first, then follow the asked resources upstream; the request stays open
        (answered when the client cancels it or goes) and every notice carries its id."""
        if modern.envelope_of(sink) is None:
            sink(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND,
                               f"method not found: {modern.LISTEN} (a 2026-07-28 request; this session is legacy)"))
            return
        wanted = modern.listen_filter(params)
        if isinstance(wanted, str):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, wanted))
            return
        if rid in self._listens:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_REQUEST, f"a listen stream with id {rid!r} is already open"))
            return
        if self._fw.starting_up():
            # Opened now, the stream would announce start-up's changes to lists its client's own
            # listings (which wait) already show, and follow none of a starting server's resources.
            self._fw.defer(msg, sink)
            return
        envelope = modern.envelope_of(sink)
        if wanted.get("taskIds") and not task_wire.client_declares_modern(envelope.capabilities if envelope else None):
            sink(jsonrpc.error(rid, modern.MISSING_CAPABILITY, "notifications.taskIds needs the tasks extension "
                               "in the request's capabilities", {"requiredCapabilities": {"extensions": {
                                   task_wire.EXTENSION: {}}}}))
            return
        asked = dict.fromkeys(wanted.get("resourceSubscriptions", ()))
        owners = [(uri, self._view.resource_owner(uri)) for uri in asked]
        followed = [(uri, owner) for uri, owner in owners if owner is not None]
        tasks = self._follow_tasks(wanted.get("taskIds"), sink) if wanted.get("taskIds") else ()
        self._listens.open(rid, sink, wanted, [uri for uri, _ in followed], self._view.catalogue(), tasks)
        for uri, (server, original) in followed:
            ref = self._ctx.connection(server)
            if ref is not None:
                self._subscribe(ref, rid, server, original, uri)
            elif waking.waits(self._ctx.servers().get(server), 0):
                self._subscribe_on_start(rid, server, original, uri)
            # else not running: a later ResourceUpdated cannot come from it either

    def _subscribe(self, ref, rid, server: str, original: str, uri: str) -> None:
        me = self._me

        def subscribed(outcome) -> None:  # the connection's greenlet: a tell, nothing else
            _tell(me, ListenSubscribed(rid, server, original, uri, not isinstance(outcome, UpstreamError)))
        _tell(ref, Forward("resources/subscribe", {"uri": original}, subscribed, origin=self._listen_origin(rid)))

    def _subscribe_on_start(self, rid, server: str, original: str, uri: str) -> None:
        """Following a resource of an idle on-demand server starts it (a subscription is a use); the
        subscribe goes once it is up, within the server's timeout. A stream that ended meanwhile
        unsubscribes again as soon as the server accepts (Listens.subscribed)."""
        ctx = self._ctx

        def subscribe_when_up() -> None:  # a greenlet of its own: reads snapshots, tells only
            ref = ctx.connection(server)
            if ref is not None:
                self._subscribe(ref, rid, server, original, uri)
        wait = gevent.spawn(waking.wait_for_start, server, ctx.servers, ctx.server_changes, None,
                            lambda: ctx.wake(server, "subscriptions/listen"), subscribe_when_up)
        gevent.spawn_later(ctx.server_timeout(server), wait.kill, block=False)

    def _listen_origin(self, rid) -> tuple:
        return (self._me, modern.LISTEN, rid)

    def listen_unsubscriber(self, rid):
        def unsubscribe(server: str, uri: str) -> None:
            ref = self._ctx.connection(server)
            if ref is not None:
                # False: a new generation of it never heard of this subscription
                _tell(ref, Forward("resources/unsubscribe", {"uri": uri}, ignore, origin=self._listen_origin(rid)))
        return unsubscribe

    # ---------------------------------------------------------------- what a request's envelope decides

    def refuse_undeclared(self, req: ServerRequest) -> bool:
        """A server request reaching a modern call whose envelope lacks the capability it needs:
        the upstream hears -32021, and the call goes on (True if refused so). Over stdio troupe
        only guesses which call a server request belongs to (the newest in flight), and servers
        also ask on their own (server-everything asks for roots after it starts): failing the
        call would punish one that may have nothing to do with it. A server that did need the
        answer says so in its result."""
        call = self._table.current(req.origin_request)
        envelope = modern.envelope_of(call.sink) if call is not None else None
        need = NEEDS.get(req.method)
        if call is None or envelope is None or need is None or need in envelope.capabilities:
            return False
        req.on_reply(UpstreamError(modern.MISSING_CAPABILITY, f"the client did not declare {need}",
                                   {"requiredCapabilities": {need: {}}}, server=req.server))
        return True

    def relay_log_to_requests(self, event: ServerLogged) -> None:
        """A server's log line goes with each modern request in flight to that server whose
        envelope asked for logs at its level, on that request's own stream; never to others."""
        level = event.level
        logger = f"{event.server}/{event.logger}" if event.logger else event.server
        for call in self._table.calls():
            envelope = modern.envelope_of(call.sink)
            if envelope is not None and call.server == event.server and envelope.logs(level):
                call.sink(jsonrpc.notification("notifications/message", {
                    "level": level if level in modern.mcp.LOG_LEVELS else "info", "logger": logger,
                    "data": event.data}))
