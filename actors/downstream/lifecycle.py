"""The session's legacy lifecycle (the handshake era): initialize, ping, logging/setLevel, and
the notices a legacy session gets unasked (logs at its level, list changes it has not seen)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from actors.downstream.list_notices import ShownLists, kinds_of
from actors.events.kinds import ServerLogged
from actors.protocol import jsonrpc, mcp
from actors.tasks import session_side as task_offer

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext

LIST_CHANGED_NOTICE = {"tools": "notifications/tools/list_changed",
                       "resources": "notifications/resources/list_changed",
                       "prompts": "notifications/prompts/list_changed"}


class Handshake:
    """The state the handshake era keeps for one legacy session (its client's capabilities and
    info, the negotiated version, whether it is initialized, its log level, what it has of each
    list: ShownLists) and the requests and notices that read or write it: initialize,
    ping, logging/setLevel, logs at its level and list changes it has not seen. A modern request
    never reaches these (the revision removed those methods). Owned by one Session, used only
    from its greenlet; `notify` is the Session's sink for unsolicited messages (None: none)."""

    def __init__(self, ctx: SessionContext, me, mode: str, view: ClientView, notify: Callable | None,
                 instructions: str) -> None:
        self._ctx, self._me, self._mode, self._view, self._notify = ctx, me, mode, view, notify
        self._instructions = instructions
        self.client_caps: dict = {}
        self.client_info: dict = {}
        self.protocol_version = mcp.LATEST
        self.initialized = False
        self.log_level: str | None = None  # set by logging/setLevel; None = relay no logs
        self._lists = ShownLists()

    def served(self, kind: str, cat: Catalogue) -> None:
        """The client has just been shown list `kind` of its view `cat`."""
        self._lists.shown(kind, cat)

    def initialize(self, rid, params, sink, msg) -> None:
        caps, info = params.get("capabilities"), params.get("clientInfo")
        self.client_caps = caps if isinstance(caps, dict) else {}
        self.client_info = info if isinstance(info, dict) else {}
        self.protocol_version = mcp.negotiate(params.get("protocolVersion"))
        capabilities = mcp.SESSION_CAPABILITIES
        tasks = task_offer.legacy_capability(self._ctx, self._view.catalogue(), self.protocol_version)
        if tasks is not None:
            capabilities = {**capabilities, "tasks": tasks}
        sink(jsonrpc.result(rid, {
            "protocolVersion": self.protocol_version,
            "capabilities": capabilities,
            "serverInfo": mcp.SERVER_INFO,
            "instructions": self._instructions}))

    @staticmethod
    def ping(rid, params, sink, msg) -> None:
        sink(jsonrpc.result(rid, {}))

    def set_level(self, rid, params, sink, msg) -> None:
        level = params.get("level")
        if level not in mcp.LOG_LEVELS:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"level must be one of {', '.join(mcp.LOG_LEVELS)}"))
            return
        self.log_level = level
        self._ctx.set_log_level(self._me, level)
        sink(jsonrpc.result(rid, {}))

    def relay_log(self, event: ServerLogged) -> None:
        if self.log_level is None or self._notify is None:
            return
        profile = self._view.profile
        if profile is not None and not profile.sees_server(event.server):
            return  # a hidden server's log lines name it, and may say what it holds
        level = event.level if event.level in mcp.LOG_LEVELS else "info"
        if mcp.LOG_LEVELS.index(level) < mcp.LOG_LEVELS.index(self.log_level):
            return
        params = {"level": level, "logger": f"{event.server}/{event.logger}" if event.logger else event.server,
                  "data": event.data}
        self._notify(jsonrpc.notification("notifications/message", params))

    def list_changed(self, kinds, cat: Catalogue) -> None:
        """Lists of these kinds changed; `cat` is the client's view now: it hears of each whose
        list is news to it (ShownLists.news)."""
        if self._notify is None or not self.initialized:
            return
        for kind in kinds_of(kinds):
            if kind == "tools" and self._mode == "meta":
                continue  # meta mode's tool list never changes
            if self._lists.news(kind, cat):
                self._notify(jsonrpc.notification(LIST_CHANGED_NOTICE[kind]))
