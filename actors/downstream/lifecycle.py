"""The session's legacy lifecycle (the handshake era): initialize, ping, logging/setLevel, and
the notices a legacy session gets unasked (logs at its level, list changes it has not seen)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from actors.events.kinds import ServerLogged
from actors.protocol import jsonrpc, mcp

if TYPE_CHECKING:
    from actors.catalogue.views import Profile
    from actors.runtime import Runtime

LIST_CHANGED_NOTICE = {"tools": "notifications/tools/list_changed",
                       "resources": "notifications/resources/list_changed",
                       "prompts": "notifications/prompts/list_changed"}


class Lifecycle:
    """Mixed into Session: the handlers of the legacy session's lifecycle and its unsolicited
    notices. They write the session state the handshake era keeps (capabilities, version, log
    level); a modern request never reaches them (the revision removed these methods)."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        mode: str
        actor_ref: Any
        profile: Profile | None
        notify: Callable | None
        client_caps: dict
        client_info: dict
        protocol_version: str
        initialized: bool
        log_level: str | None
        _served_version: dict[str, int]

        def _instructions(self) -> str: ...

    def _initialize(self, rid, params, sink, msg) -> None:
        self.client_caps = params.get("capabilities") or {}
        self.client_info = params.get("clientInfo") or {}
        self.protocol_version = mcp.negotiate(params.get("protocolVersion"))
        sink(jsonrpc.result(rid, {
            "protocolVersion": self.protocol_version,
            "capabilities": mcp.SESSION_CAPABILITIES,
            "serverInfo": mcp.SERVER_INFO,
            "instructions": self._instructions()}))

    def _ping(self, rid, params, sink, msg) -> None:
        sink(jsonrpc.result(rid, {}))

    def _set_level(self, rid, params, sink, msg) -> None:
        level = params.get("level")
        if level not in mcp.LOG_LEVELS:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"level must be one of {', '.join(mcp.LOG_LEVELS)}"))
            return
        self.log_level = level
        self.rt.set_log_level(self.actor_ref, level)
        sink(jsonrpc.result(rid, {}))


    def _relay_log(self, event: ServerLogged) -> None:
        if self.log_level is None or self.notify is None:
            return
        if self.profile is not None and not self.profile.sees_server(event.server):
            return  # a hidden server's log lines name it, and may say what it holds
        level = event.level if event.level in mcp.LOG_LEVELS else "info"
        if mcp.LOG_LEVELS.index(level) < mcp.LOG_LEVELS.index(self.log_level):
            return
        params = {"level": level, "logger": f"{event.server}/{event.logger}" if event.logger else event.server,
                  "data": event.data}
        self.notify(jsonrpc.notification("notifications/message", params))


    def _list_changed(self, lists, version: int) -> None:
        if self.notify is None or not self.initialized:
            return
        for kind in ("tools", "resources", "prompts"):
            if kind not in lists or (kind == "tools" and self.mode == "meta"):
                continue  # meta mode's tool list never changes
            if self._served_version[kind] >= version:
                continue  # this client already saw that catalogue
            self.notify(jsonrpc.notification(LIST_CHANGED_NOTICE[kind]))
