"""What an HTTP transport sees of OAuth: the current bearer of its server (read from the AuthBox
on every request) and a way to report a 401. Built by the runtime, handed to the transports."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from actors.auth.messages import Unauthorized
from actors.auth.tokens import fingerprint
from actors.settings.upstream_auth import UpstreamAuth
from actors.tells import tell


@dataclass(frozen=True, slots=True)
class AuthSnapshot:
    """Published by the AuthKeeper: the bearer per server URL, and per URL waiting for a sign-in
    its authorization URL (or why there is none yet). Its repr shows no token."""

    bearers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    sign_ins: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        return f"AuthSnapshot(servers_with_token={len(self.bearers)}, waiting={sorted(self.sign_ins)!r})"


class AuthBox:
    """Holds the current AuthSnapshot; only the AuthKeeper replaces it, anyone reads `.current`."""

    def __init__(self) -> None:
        self.current = AuthSnapshot()


class UpstreamAuthAccess:
    """The transports' side: `bearer(url)` per request, `unauthorized(...)` on a 401."""

    def __init__(self, box: AuthBox, keeper) -> None:
        self.box, self.keeper = box, keeper

    def bearer(self, url: str) -> str | None:
        return self.box.current.bearers.get(url)

    def unauthorized(self, server: str, url: str, challenge: str | None, sent: str | None,
                     settings: UpstreamAuth | None = None) -> None:
        token = sent[7:] if sent and sent[:7].lower() == "bearer " else None
        tell(self.keeper, Unauthorized(server, url, challenge, fingerprint(token), settings))
