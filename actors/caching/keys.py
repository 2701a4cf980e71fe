"""Cache keys: the server, the request (tool and canonical arguments, or a resource's URI) and the
audience the answer was made for (the client's profile; the client itself for a server that signs
in per client). Two profiles never share an entry."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson


@dataclass(frozen=True, slots=True)
class CacheKey:
    """What identifies one cached answer. `request` is canonical JSON bytes (keys sorted), so equal
    arguments in any order, from any process, give one key; `uri` is set for resources/read (a
    resource update drops exactly those entries)."""

    server: str
    method: str  # tools/call | resources/read
    request: bytes
    audience: str
    uri: str | None = None

    def digest(self) -> str:
        """A stable name for this key across processes (the Redis backend's key)."""
        raw = b"\0".join((self.server.encode(), self.method.encode(), self.audience.encode(), self.request))
        return hashlib.sha256(raw).hexdigest()


def audience(profile: str | None, client: str | None = None) -> str:
    """Who an answer was made for: the profile's name (`-` for none), plus the client's name when
    the server answers each client with its own credentials."""
    who = f"p:{profile}" if profile is not None else "-"
    return f"{who}/c:{client}" if client is not None else who


def canonical(value) -> bytes:
    """JSON with sorted keys: the same arguments give the same bytes whatever their order."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def tool_key(server: str, tool: str, arguments: dict, who: str) -> CacheKey:
    """The key of a tools/call of `tool` (the server's own name for it) with `arguments`."""
    return CacheKey(server, "tools/call", canonical([tool, arguments]), who)


def resource_key(server: str, uri: str, who: str) -> CacheKey:
    """The key of a resources/read of `uri` (the server's own URI)."""
    return CacheKey(server, "resources/read", canonical(uri), who, uri)
