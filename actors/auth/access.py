"""What an HTTP transport sees of OAuth: the current bearer of its server (read from the AuthBox
on every request) and a way to report a 401. Built by the runtime, handed to the transports."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import gevent.event

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
    refreshing: frozenset[str] = frozenset()  # URLs whose token request is in flight

    def __repr__(self) -> str:
        return f"AuthSnapshot(servers_with_token={len(self.bearers)}, waiting={sorted(self.sign_ins)!r})"


class AuthBox:
    """Holds the current AuthSnapshot; only the AuthKeeper replaces it (`publish`), anyone reads
    `.current`; a transport whose token a refresh is replacing waits for the next one (`changed`)."""

    def __init__(self) -> None:
        self.current = AuthSnapshot()
        self.changed = gevent.event.Event()  # set, and replaced, on every publish

    def publish(self, snapshot: AuthSnapshot) -> None:
        self.current = snapshot
        waiters, self.changed = self.changed, gevent.event.Event()
        waiters.set()


class UpstreamAuthAccess:
    """The transports' side: `bearer(url)` per request, `unauthorized(...)` on a 401."""

    def __init__(self, box: AuthBox, keeper) -> None:
        self.box, self.keeper = box, keeper

    def bearer(self, url: str) -> str | None:
        return self.box.current.bearers.get(url)

    def renewed(self, url: str, sent: str | None, timeout: float) -> bool:
        """True if the bearer for `url` is no longer the `Authorization` value `sent`, waiting up
        to `timeout` while a refresh for it is in flight (from a transport's request greenlet)."""
        deadline = time.monotonic() + timeout
        while url in self.box.current.refreshing and time.monotonic() < deadline:
            self.box.changed.wait(max(deadline - time.monotonic(), 0.0))
        token = self.bearer(url)
        return token is not None and f"Bearer {token}" != sent

    def unauthorized(self, server: str, url: str, challenge: str | None, sent: str | None,
                     settings: UpstreamAuth | None = None) -> None:
        token = sent[7:] if sent and sent[:7].lower() == "bearer " else None
        tell(self.keeper, Unauthorized(server, url, challenge, fingerprint(token), settings))
