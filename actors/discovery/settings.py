"""The config's `discovery:` section as one frozen, validated settings object."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping
from typing import Any, TypeVar, overload

from loguru import logger

from actors.discovery.sources import FILE_PROVIDERS, MAX_FILE_BYTES

_T = TypeVar("_T")
PATH_PROVIDER = "path"
ALL_PROVIDERS = (*FILE_PROVIDERS, PATH_PROVIDER)
STORES = ("memory", "sqlite")

DEFAULT_INTERVAL = 300.0  # periodic re-discovery, a safety net under the file watcher
DEFAULT_DEADLINE = 15.0  # a provider slower than this is skipped for the cycle
DEFAULT_WATCH_INTERVAL = 1.0  # how often the watcher polls mtimes and sizes
DEFAULT_HELP_TIMEOUT = 2.0  # `binary --help` on PATH
DEFAULT_PROBE_CONCURRENCY = 8  # `--help` runs at once
# Claude Code keeps its history in ~/.claude.json, so that one file is allowed to be bigger.
DEFAULT_CLAUDE_JSON_BYTES = 32 * 1024 * 1024
DEFAULT_HEALTH_INTERVAL = 60.0
DEFAULT_HEALTH_TIMEOUT = 10.0
DEFAULT_HEALTH_CONCURRENCY = 4
DEFAULT_FIRST_CHECK_DELAY = 3.0  # give the supervisor time to connect before probing a new service

TOP_KEYS = {"enabled", "interval", "providers", "store", "store_path", "path_probe", "auto_connect",
            "max_file_bytes", "max_claude_json_bytes", "deadline", "watch", "watch_interval", "health",
            "home", "project_root", "system_root", "start"}
PATH_KEYS = {"enabled", "allowlist", "auto_connect", "timeout", "path", "concurrency"}
AUTO_KEYS = {"client_configs", "registered"}
HEALTH_KEYS = {"enabled", "interval", "timeout", "concurrency", "first_check_delay"}


@dataclass(frozen=True, slots=True)
class HealthSettings:
    """The `discovery.health:` section, parsed: whether the HealthChecker runs, its interval,
    per-probe timeout and concurrency, and how long a new service waits for its first probe."""

    enabled: bool = True
    interval: float = DEFAULT_HEALTH_INTERVAL
    timeout: float = DEFAULT_HEALTH_TIMEOUT
    concurrency: int = DEFAULT_HEALTH_CONCURRENCY
    first_check_delay: float = DEFAULT_FIRST_CHECK_DELAY


@dataclass(frozen=True, slots=True)
class DiscoverySettings:
    """The config's `discovery:` section, parsed and checked (DiscoveryEngine describes each key);
    `path_*` come from `path_probe:`, `auto_*` from `auto_connect:`, `path_search` is the PATH searched."""

    home: str
    project_root: str | None
    system_root: str = "/"  # where managed files (/etc/claude-code/…) are looked for; tests move it
    enabled: bool = True
    interval: float = DEFAULT_INTERVAL
    providers: tuple = ALL_PROVIDERS
    store: str = "memory"
    store_path: str | None = None
    path_enabled: bool = False  # running binaries found on PATH is opt-in: see config/default.yaml
    path_allowlist: tuple = ()
    path_auto_connect: bool = False
    path_timeout: float = DEFAULT_HELP_TIMEOUT
    path_search: str = ""
    path_concurrency: int = DEFAULT_PROBE_CONCURRENCY
    auto_client_configs: bool = True
    auto_registered: bool = True
    max_file_bytes: int = MAX_FILE_BYTES
    max_claude_json_bytes: int = DEFAULT_CLAUDE_JSON_BYTES
    deadline: float = DEFAULT_DEADLINE
    watch: bool = True
    watch_interval: float = DEFAULT_WATCH_INTERVAL
    health: HealthSettings = HealthSettings()


class _Reader:
    """Reads one mapping of the discovery settings: a value of the wrong type or a negative number
    raises ValueError naming its key path; an unknown key is only warned about."""

    def __init__(self, data: Any, path: str, allowed: set):
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{path}: must be a mapping")
        for key in data:
            if key not in allowed:  # warn, not fail: a newer config must not stop an older troupe
                logger.warning("{}.{}: unknown discovery setting, ignored", path, key)
        self.data, self.path = data, path

    @overload
    def get(self, key: str, kind: type[_T], default: _T) -> _T: ...
    @overload
    def get(self, key: str, kind: type[_T], default: None) -> _T | None: ...

    def get(self, key: str, kind, default):
        value = self.data.get(key)
        if value is None:
            return default
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
            raise ValueError(f"{self.path}.{key}: must be {kind.__name__}, got {type(value).__name__}")
        if kind in (int, float) and value < 0:
            raise ValueError(f"{self.path}.{key}: must be >= 0")
        return value

    def strings(self, key: str, default: tuple) -> tuple:
        value = self.get(key, list, None)
        if value is None:
            return default
        if not all(isinstance(v, str) for v in value):
            raise ValueError(f"{self.path}.{key}: must be a list of strings")
        return tuple(value)

    def section(self, key: str, allowed: set) -> "_Reader":
        return _Reader(self.data.get(key), f"{self.path}.{key}", allowed)


def _expand(path: str, home: str) -> str:
    return str(Path(home) / path[2:]) if path.startswith("~/") else path


def parse(settings: Mapping | None, *, home: str | None = None,
          project_root: str | None = None) -> DiscoverySettings:
    """Keyword arguments win over the section's home/project_root, which win over the environment."""
    top = _Reader(settings, "discovery", TOP_KEYS)
    home = home or top.get("home", str, None) or os.environ.get("HOME") or str(Path.home())
    root = project_root or top.get("project_root", str, None) or os.getcwd()
    providers = top.strings("providers", ALL_PROVIDERS)
    for p in providers:
        if p not in ALL_PROVIDERS:
            raise ValueError(f"discovery.providers: {p!r} is not one of {', '.join(ALL_PROVIDERS)}")
    start = top.get("start", str, "always")
    if start not in ("always", "on_demand"):  # the servers it finds start always, or on first use
        raise ValueError(f"discovery.start: {start!r} is not one of always, on_demand")
    store = top.get("store", str, "memory")
    if store not in STORES:
        raise ValueError(f"discovery.store: {store!r} is not one of {', '.join(STORES)}")
    store_path = top.get("store_path", str, None)
    pp = top.section("path_probe", PATH_KEYS)
    auto = top.section("auto_connect", AUTO_KEYS)
    hs = top.section("health", HEALTH_KEYS)
    health = HealthSettings(
        enabled=hs.get("enabled", bool, True), interval=hs.get("interval", float, DEFAULT_HEALTH_INTERVAL),
        timeout=hs.get("timeout", float, DEFAULT_HEALTH_TIMEOUT) or DEFAULT_HEALTH_TIMEOUT,
        concurrency=max(1, hs.get("concurrency", int, DEFAULT_HEALTH_CONCURRENCY)),
        first_check_delay=hs.get("first_check_delay", float, DEFAULT_FIRST_CHECK_DELAY))
    return DiscoverySettings(
        home=_expand(home, str(Path.home())), project_root=_expand(root, home),
        system_root=top.get("system_root", str, "/") or "/",
        enabled=top.get("enabled", bool, True), interval=top.get("interval", float, DEFAULT_INTERVAL),
        providers=providers, store=store, store_path=_expand(store_path, home) if store_path else None,
        path_enabled=pp.get("enabled", bool, False), path_allowlist=pp.strings("allowlist", ()),
        path_auto_connect=pp.get("auto_connect", bool, False),
        path_timeout=pp.get("timeout", float, DEFAULT_HELP_TIMEOUT) or DEFAULT_HELP_TIMEOUT,
        path_search=pp.get("path", str, None) or os.environ.get("PATH", os.defpath),
        path_concurrency=max(1, pp.get("concurrency", int, DEFAULT_PROBE_CONCURRENCY)),
        auto_client_configs=auto.get("client_configs", bool, True),
        auto_registered=auto.get("registered", bool, True),
        max_file_bytes=top.get("max_file_bytes", int, MAX_FILE_BYTES) or MAX_FILE_BYTES,
        max_claude_json_bytes=top.get("max_claude_json_bytes", int, DEFAULT_CLAUDE_JSON_BYTES),
        deadline=top.get("deadline", float, DEFAULT_DEADLINE) or DEFAULT_DEADLINE,
        watch=top.get("watch", bool, True),
        watch_interval=top.get("watch_interval", float, DEFAULT_WATCH_INTERVAL) or DEFAULT_WATCH_INTERVAL,
        health=health)
