"""Profile: one `profiles:` entry of the config, the rules a client's view of the catalogue follows
(catalogue/views.py cuts the views). On its own, with nothing of the catalogue's machinery: the
config reads it before troupe has loaded the rest of itself (actors/main.py starts the config's
servers that early)."""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actors.settings.model import DEFAULT_CLIENT_SESSIONS

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Entry


@dataclass(frozen=True, slots=True)
class Profile:
    """One `profiles:` entry. `servers` None covers every server; empty `allow` allows every
    tool; `deny` wins over `allow`; globs match the qualified names clients see (`github__*`).
    `max_sessions` is no view rule: it is the HTTP front's quota of sessions for each client in
    the profile (actors/serve/quotas.py)."""

    name: str
    servers: frozenset | None = None
    allow: tuple = ()
    deny: tuple = ()
    read_only: bool = False
    max_sessions: int = DEFAULT_CLIENT_SESSIONS

    @property
    def everything(self) -> bool:
        """True when the profile hides nothing (an empty profile `{}`)."""
        return self.servers is None and not self.allow and not self.deny and not self.read_only

    def sees_server(self, server: str) -> bool:
        return self.servers is None or server in self.servers

    def sees_name(self, server: str, name: str) -> bool:
        """The server and glob tests of a tool by its qualified name."""
        if not self.sees_server(server):
            return False
        if self.allow and not any(fnmatch.fnmatchcase(name, glob) for glob in self.allow):
            return False
        return not any(fnmatch.fnmatchcase(name, glob) for glob in self.deny)

    def sees_tool(self, entry: Entry) -> bool:
        if not self.sees_name(entry.server, entry.name):
            return False
        if self.read_only:
            annotations = entry.definition.get("annotations")
            return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
        return True

    def passes_through(self, server: str | None) -> bool:
        """Whether flat mode may pass an unlisted name to `server`: only when nothing of it is hidden."""
        return server is not None and self.sees_server(server) and not (self.allow or self.deny or self.read_only)
