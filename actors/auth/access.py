"""What an HTTP transport sees of OAuth: the current bearer of its server (read from the published AuthSnapshot
on every request) and a way to report a 401. Built by the runtime, handed to the transports."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from actors.auth.messages import Unauthorized
from actors.auth.tokens import fingerprint
from actors.published import Published, Publisher
from actors.settings.upstream_auth import UpstreamAuth
from actors.tells import tell


CLIENT_MARK = " client="  # no URL holds a space: the key of a client's own grant is unambiguous


def grant_key(url: str, client: str | None = None) -> str:
    """The key of a grant: the server's URL, or for `auth: per_client` the URL and one client."""
    return url if client is None else f"{url}{CLIENT_MARK}{client}"


def split_key(key: str) -> tuple[str, str | None]:
    """(server URL, client name or None) of a grant key."""
    url, mark, client = key.partition(CLIENT_MARK)
    return url, (client if mark else None)


@dataclass(frozen=True, slots=True)
class AuthSnapshot:
    """Published by the AuthKeeper: the bearer per grant key (a server URL, or a URL and a client,
    see grant_key), and per key waiting for a sign-in its authorization URL (or why there is
    none yet). Its repr shows no token."""

    bearers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    sign_ins: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    refreshing: frozenset[str] = frozenset()  # URLs whose token request is in flight

    def __repr__(self) -> str:
        return f"AuthSnapshot(servers_with_token={len(self.bearers)}, waiting={sorted(self.sign_ins)!r})"


def auth_snapshot() -> tuple[Published[AuthSnapshot], Publisher[AuthSnapshot]]:
    """The published AuthSnapshot: only the AuthKeeper gets the Publisher; transports read
    `.current`, and one whose token a refresh is replacing waits for the next (`changed`)."""
    return Published.create(AuthSnapshot(), waitable=True)


class UpstreamAuthAccess:
    """The transports' side: `bearer(url)` per request, `unauthorized(...)` on a 401."""

    def __init__(self, box: Published[AuthSnapshot], keeper) -> None:
        self.box, self.keeper = box, keeper

    def bearer(self, url: str, client: str | None = None) -> str | None:
        """The bearer for `url`; with a client, that client's own (never troupe's)."""
        return self.box.current.bearers.get(grant_key(url, client))

    def renewed(self, url: str, sent: str | None, timeout: float, client: str | None = None) -> bool:
        """True if the bearer for `url` is no longer the `Authorization` value `sent`, waiting up
        to `timeout` while a refresh for it is in flight (from a transport's request greenlet)."""
        key = grant_key(url, client)
        deadline = time.monotonic() + timeout
        while key in self.box.current.refreshing and time.monotonic() < deadline:
            self.box.changed.wait(max(deadline - time.monotonic(), 0.0))
        token = self.bearer(url, client)
        return token is not None and f"Bearer {token}" != sent

    def unauthorized(self, server: str, url: str, challenge: str | None, sent: str | None,
                     settings: UpstreamAuth | None = None, client: str | None = None) -> None:
        token = sent[7:] if sent and sent[:7].lower() == "bearer " else None
        tell(self.keeper, Unauthorized(server, url, challenge, fingerprint(token), settings, client))

    def sign_in_link(self, url: str, client: str | None, timeout: float, sent: str | None = None) -> dict:
        """{auth_url} or {auth_error} of the sign-in waiting for `url` (and client), waiting up to
        `timeout` while the AuthKeeper prepares it; {"refreshed": True} if meanwhile a refresh
        replaced the refused bearer `sent` (a call again will do); {} if nothing came."""
        key = grant_key(url, client)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.box.current
            if key in current.sign_ins:
                return dict(current.sign_ins[key])
            token = current.bearers.get(key)
            if token is not None and f"Bearer {token}" != sent and key not in current.refreshing:
                return {"refreshed": True}
            self.box.changed.wait(max(deadline - time.monotonic(), 0.0))
        return {}
