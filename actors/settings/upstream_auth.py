"""The `auth:` entry of an HTTP server: `auth: oauth`, `auth: per_client`, or `auth: {type: oauth,
per_client, client_id, client_secret, client_secret_env, scopes: […]}` (all optional)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Callable

KEYS = {"type", "per_client", "client_id", "client_secret", "client_secret_env", "scopes"}


@dataclass(frozen=True, slots=True)
class UpstreamAuth:
    """OAuth settings of one upstream. A configured client is used instead of registering one; the
    secret itself never appears in a repr (or a status report). `per_client`: each serve.clients
    client signs in for itself and its calls carry only its own token; troupe's own requests
    (initialize, lists, pings) carry the grant troupe signed in with."""

    type: str = "oauth"
    per_client: bool = False
    client_id: str | None = None
    client_secret: str | None = field(default=None, repr=False)
    client_secret_env: str | None = None
    scopes: tuple[str, ...] = ()

    def secret(self) -> str | None:
        """The client secret: written in the config, or read from the named variable now."""
        return self.client_secret or (os.environ.get(self.client_secret_env) if self.client_secret_env else None)


def parse(value: Any, path: str, fail: Callable[[str, str], None]) -> UpstreamAuth | None:
    """None when absent; a bad entry is reported through `fail` (never quoting a secret)."""
    if value is None:
        return None
    if value == "oauth":
        return UpstreamAuth()
    if value == "per_client":
        return UpstreamAuth(per_client=True)
    if not isinstance(value, dict):
        fail(path, "must be `oauth`, `per_client` or a mapping {type: oauth, per_client, client_id, "
                   "client_secret, scopes}")
        return None
    for key in sorted(set(value) - KEYS):
        fail(f"{path}.{key}", f"is not one of {', '.join(sorted(KEYS))}")
    if value.get("type", "oauth") != "oauth":
        fail(f"{path}.type", "must be oauth")
    strings = {}
    for key in ("client_id", "client_secret", "client_secret_env"):
        if value.get(key) is not None and not isinstance(value.get(key), str):
            fail(f"{path}.{key}", "must be a string")
        elif value.get(key):
            strings[key] = value[key]
    scopes = value.get("scopes") or []
    if isinstance(scopes, str):
        scopes = scopes.split()
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        fail(f"{path}.scopes", "must be a list of strings")
        scopes = []
    per_client = value.get("per_client", False)
    if not isinstance(per_client, bool):
        fail(f"{path}.per_client", "must be true or false")
        per_client = False
    return UpstreamAuth(per_client=per_client, client_id=strings.get("client_id"),
                        client_secret=strings.get("client_secret"),
                        client_secret_env=strings.get("client_secret_env"), scopes=tuple(scopes))
