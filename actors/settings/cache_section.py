"""The config's response cache: `cache:` on a server (what of it is cached, for how long) and the
top-level `cache:` section (how big the store is and where it lives). Checked with the config
loader's `fail(path, message)`, so every problem names its file, line and key."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

BACKENDS = ("memory", "redis")
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # the store's bound: encoded results, summed
Fail = Callable[[str, str], None]


@dataclass(frozen=True, slots=True)
class ServerCache:
    """One server's `cache:`. `ttl` (seconds) covers its tools annotated readOnlyHint: true;
    `tools` names tools (as the server lists them) with their own ttl, cached whatever their
    annotations say (0: never cached); `resources` is the ttl of its resources/read (None: the
    server's ttl; 0: not cached)."""

    ttl: float | None = None
    tools: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    resources: float | None = None


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """The top-level `cache:` section: the store's byte bound and its backend (memory, or the
    cluster's Redis, shared by every instance)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    backend: str = "memory"


def _seconds(value: Any, path: str, fail: Fail, zero_ok: bool) -> float | None:
    """A ttl in seconds: a positive number (or 0 where it means "never cached")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or \
            math.isinf(value) or value < 0 or (value == 0 and not zero_ok):
        fail(path, "must be a positive number of seconds" + (" (or 0: never cached)" if zero_ok else "")
             + f", got {value!r}")
        return None
    return float(value)


def server(data: Any, path: str, fail: Fail) -> ServerCache | None:
    """A server's `cache:` checked: {ttl: SECONDS, tools: {NAME: SECONDS | {ttl: SECONDS}},
    resources: SECONDS}; None when absent."""
    if data is None:
        return None
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        data = {"ttl": data}  # `cache: 60` is short for `cache: {ttl: 60}`
    if not isinstance(data, dict):
        fail(path, "must be a mapping like {ttl: 60} (seconds)")
        return None
    for key in data:
        if key not in ("ttl", "tools", "resources"):
            fail(f"{path}.{key}", "unknown key (allowed: resources, tools, ttl)")
    ttl = _seconds(data["ttl"], f"{path}.ttl", fail, zero_ok=False) if data.get("ttl") is not None else None
    resources = _seconds(data["resources"], f"{path}.resources", fail, zero_ok=True) \
        if data.get("resources") is not None else None
    tools: dict[str, float] = {}
    raw = data.get("tools")
    if raw is not None and not isinstance(raw, dict):
        fail(f"{path}.tools", "must be a mapping of tool names (as the server lists them) to seconds")
        raw = None
    for name, value in (raw or {}).items():
        where = f"{path}.tools.{name}"
        if isinstance(value, dict):
            for key in value:
                if key != "ttl":
                    fail(f"{where}.{key}", "unknown key (allowed: ttl)")
            value, where = value.get("ttl"), f"{where}.ttl"
        seconds = _seconds(value, where, fail, zero_ok=True)
        if seconds is not None:
            tools[str(name)] = seconds
    return ServerCache(ttl, MappingProxyType(tools), resources)


def store(data: Any, fail: Fail) -> CacheConfig:
    """The top-level `cache:` section checked: {max_bytes: N, backend: memory | redis}."""
    if data is None:
        return CacheConfig()
    if not isinstance(data, dict):
        fail("cache", "must be a mapping like {max_bytes: 67108864, backend: memory}")
        return CacheConfig()
    for key in data:
        if key not in ("max_bytes", "backend"):
            fail(f"cache.{key}", "unknown key (allowed: backend, max_bytes)"
                 + (" (a ttl belongs on a server: servers[i].cache.ttl)" if key == "ttl" else ""))
    max_bytes = data.get("max_bytes", DEFAULT_MAX_BYTES)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        fail("cache.max_bytes", f"must be a positive whole number of bytes, got {max_bytes!r}")
        max_bytes = DEFAULT_MAX_BYTES
    backend = data.get("backend", "memory")
    if backend not in BACKENDS:
        fail("cache.backend", f"{backend!r} is not one of {', '.join(BACKENDS)}")
        backend = "memory"
    return CacheConfig(max_bytes, backend)


def check_backend(cache: CacheConfig, cluster: Any) -> list[str]:
    """The problems of a cache backend that needs what the config lacks (Redis needs a cluster)."""
    if cache.backend == "redis" and cluster is None:
        return ["cache.backend: redis shares the cache through the cluster's Redis: add a cluster: "
                "section or --redis URL"]
    return []
