"""The Supervisor's share of upstream logging: the level every upstream logs at is the most
verbose any session asked for (each session filters what it relays). A mixin of the Supervisor
actor: it runs in its greenlet and touches only its own records."""
from __future__ import annotations

from typing import Any

from actors.messages import SetLogLevel
from actors.protocol import mcp
from actors.supervision.child import Child
from actors.tells import tell


class LogLevels:
    """Mixed into the Supervisor: `_log_levels` (session → level) and `log_level` are its own."""

    children: dict[str, Child]
    clients: Any
    _log_levels: dict
    log_level: str | None

    def _session_log_level(self, session, level: str | None) -> None:
        """Upstreams log at the most verbose level any session asked for; each session filters."""
        if level is None:
            self._log_levels.pop(session, None)
        else:
            self._log_levels[session] = level
        wanted = min(self._log_levels.values(), key=mcp.LOG_LEVELS.index, default=None)
        if wanted is None or wanted == self.log_level:
            return
        self.log_level = wanted
        for child in self.children.values():
            if child.callable:
                tell(child.ref, SetLogLevel(wanted))
        self.clients.set_log_level(wanted)
