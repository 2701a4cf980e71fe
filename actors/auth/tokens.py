"""The token store: each protected server's client registration and tokens, in one JSON file
(`oauth-tokens.json` beside the approvals file), mode 0600, replaced atomically. Only the
AuthKeeper reads or writes it; nothing in it is ever logged or shown."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Mapping

from actors.trust import ledger

FILE_NAME = "oauth-tokens.json"
FILE_MODE = 0o600


def default_path(approvals_path: str | None = None) -> str:
    """Beside the approvals file: $TROUPE_CONFIG_DIR, else troupe's config directory."""
    return str(Path(approvals_path or ledger.default_path()).parent / FILE_NAME)


def fingerprint(token: str | None) -> str | None:
    """A short digest that tells tokens apart without holding one (for messages and logs)."""
    return hashlib.sha256(token.encode()).hexdigest()[:16] if token else None


@dataclass(frozen=True, slots=True)
class Grant:
    """A server's client registration and current tokens. Its repr shows no secret."""

    token_endpoint: str
    resource: str
    client_id: str
    auth_method: str
    redirect_uri: str
    access_token: str = ""
    refresh_token: str | None = None
    expires_at: float | None = None  # epoch seconds; None: the server gave no lifetime
    issued_at: float = 0.0
    scope: str | None = None
    client_secret: str | None = None

    def __repr__(self) -> str:
        return (f"Grant(client_id={self.client_id!r}, expires_at={self.expires_at!r}, "
                f"refreshable={self.refresh_token is not None})")

    __str__ = __repr__

    def with_token(self, token: Mapping, now: float | None = None) -> "Grant":
        """This grant holding a token endpoint's answer (a refresh may omit the refresh token)."""
        now = time.time() if now is None else now
        expires_in = token.get("expires_in")
        expires_at = now + float(expires_in) if isinstance(expires_in, (int, float)) else token.get("expires_at")
        return Grant(**{**asdict(self), "access_token": token["access_token"],
                        "refresh_token": token.get("refresh_token") or self.refresh_token,
                        "expires_at": float(expires_at) if expires_at else None, "issued_at": now,
                        "scope": token.get("scope") or self.scope})


_FIELDS = {f.name for f in fields(Grant)}


class TokenStore:
    """The file: {"version": 1, "servers": {<server URL>: Grant fields}}. Blocking I/O on a small
    local file, only from the AuthKeeper."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __repr__(self) -> str:
        return f"TokenStore({self.path!r})"

    def load(self) -> dict[str, Grant]:
        """Every stored grant; a missing or unreadable file is an empty store (sign in again)."""
        try:
            with open(self.path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            return {}
        servers = data.get("servers") if isinstance(data, dict) else None
        out = {}
        for key, record in (servers or {}).items():
            try:
                out[key] = Grant(**{k: v for k, v in record.items() if k in _FIELDS})
            except TypeError:
                continue  # a record from another version: that server signs in again
        return out

    def save(self, grants: Mapping[str, Grant]) -> None:
        """Write all grants: a 0600 temporary file in the same directory, fsync, rename over."""
        folder = os.path.dirname(self.path) or "."
        os.makedirs(folder, mode=0o700, exist_ok=True)
        data = {"version": 1, "servers": {key: asdict(grant) for key, grant in grants.items()}}
        fd, tmp = tempfile.mkstemp(prefix=".oauth-tokens.", dir=folder)  # mkstemp creates it 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                os.fchmod(fh.fileno(), FILE_MODE)
                json.dump(data, fh, indent=1)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
