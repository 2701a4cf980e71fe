"""A call refused by a rate limit: what it says to its client (a JSON-RPC error, and over
stateless HTTP a 429 with Retry-After), and everything an audit trail needs to record it."""
from __future__ import annotations

import math
from dataclasses import dataclass

from actors.protocol import jsonrpc
from actors.settings.rate_section import Rate

PROFILE, SERVER, ANONYMOUS = "profile", "server", "anonymous"  # a bucket's scope
ANONYMOUS_NAME = "anonymous"  # the one bucket of the clients no serve.clients entry names
TOO_MANY = "429 Too Many Requests"


@dataclass(frozen=True, slots=True)
class Refusal:
    """One refused call. `scope` and `name` name the bucket that had no token (the one whose token
    comes back last, when several had none), `limit` its limit, `retry_after_s` when it has one
    again; `client` (its serve.clients name, None: anonymous), `profile`, `server`, `method` and
    `session` (the refusing Session's key) say which call it was."""

    scope: str
    name: str
    limit: Rate
    retry_after_s: float
    client: str | None
    profile: str | None
    server: str
    method: str
    session: str = ""

    def message(self) -> str:
        what = {PROFILE: f"profile {self.name!r}", SERVER: f"server {self.name!r}",
                ANONYMOUS: "anonymous clients (serve.rate)"}.get(self.scope, self.name)
        per_minute = self.limit.shown()["per_minute"]
        return (f"rate limit reached for {what} ({per_minute}/min, burst {self.limit.burst}): "
                f"retry in {self.retry_after_s:g}s")

    def data(self) -> dict:
        return {"retry_after_s": self.retry_after_s, "limit": self.limit.shown(), "scope": self.scope,
                "name": self.name}

    def error(self, rid) -> dict:
        """The JSON-RPC error answer of request `rid`."""
        return jsonrpc.error(rid, jsonrpc.RATE_LIMITED, self.message(), self.data())


def is_refusal(answer: dict) -> bool:
    """An error answer troupe's rate limits gave (not an upstream's error that happens to use the
    same code): it gets HTTP 429 over stateless HTTP."""
    error = answer.get("error")
    if not isinstance(error, dict) or error.get("code") != jsonrpc.RATE_LIMITED:
        return False
    data = error.get("data")
    return isinstance(data, dict) and data.get("scope") in (PROFILE, SERVER, ANONYMOUS) and "retry_after_s" in data


def retry_after_header(answer: dict) -> tuple[str, str]:
    """The Retry-After header (whole seconds, at least 1) of a RATE_LIMITED error answer."""
    error = answer.get("error")
    data = error.get("data") if isinstance(error, dict) else None
    wait = data.get("retry_after_s") if isinstance(data, dict) else None
    seconds = math.ceil(wait) if isinstance(wait, (int, float)) and math.isfinite(wait) else 1
    return "Retry-After", str(max(1, seconds))
