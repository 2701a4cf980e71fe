"""YAML/JSON config → frozen config objects: reading and checking a file, with errors naming
file, key and line. The objects themselves live in actors.settings.model; they stay importable
from here, the path most of troupe uses."""
from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, TypeVar, overload

from actors.settings import audit_section, cache_section, profiles as profiles_mod, serve_section
from actors.settings.files import ConfigError, Located, read
from actors.cluster import settings as cluster_settings
from actors.settings import rate_section, start_section, tasks_section, upstream_auth, workflows_section
from actors.ops import trace_settings
from actors.settings.model import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_TOOL_BYTES,
    DEFAULT_MAX_TOOLS,
    DEFAULT_SESSION_IDLE_S,
    DEFAULT_TIMEOUT,
    MODES,
    SERVE_TRANSPORTS,
    SERVER_NAME,
    SHARE_ALL,
    SHARES,
    TRANSPORT_TYPES,
    Config,
    HttpSpec,
    PolicySpec,
    ServeConfig,
    ServerConfig,
    StdioSpec,
)

# The names importers have always taken from this module (the model's, and ConfigError).
__all__ = ["DEFAULT_CONFIG", "DEFAULT_HEADER_TIMEOUT_S", "DEFAULT_MAX_CONNECTIONS", "DEFAULT_MAX_SESSIONS",
           "DEFAULT_SESSION_IDLE_S", "DEFAULT_TIMEOUT", "MODES", "SERVE_TRANSPORTS", "SERVER_NAME",
           "TRANSPORT_TYPES", "Config", "ConfigError", "HttpSpec", "PolicySpec", "ServeConfig", "ServerConfig",
           "StdioSpec", "claude_entry_to_server", "expand", "file_of", "from_data", "load", "with_overrides"]

# The embedded default: beside the package in a checkout or editable install, under
# the prefix's config/ (setup.cfg data_files) in a regular install.
_CHECKOUT = Path(__file__).resolve().parents[2]  # actors/settings/config.py → the project root
DEFAULT_CONFIG = next((p for p in (_CHECKOUT / "config" / "default.yaml",
                                   Path(sys.prefix) / "config" / "default.yaml") if p.exists()),
                      _CHECKOUT / "config" / "default.yaml")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_T = TypeVar("_T")

_WORKFLOW_KEYS = ("workflows", "workflows_dir")  # actors/settings/workflows_section.py
_OPS_KEYS = ("audit",)  # actors/settings/audit_section.py
_KIND_NAMES = {"float": "a number", "int": "an integer", "str": "a string", "bool": "true or false",
               "list": "a list", "dict": "a mapping"}


# ---------------------------------------------------------------- loading

def expand(value: str, extra: Mapping[str, str]) -> str:
    """${VAR} from troupe's built-ins, then the environment; unknown stays as is."""
    return _VAR.sub(lambda m: extra.get(m.group(1), os.environ.get(m.group(1), m.group(0))), value)


class _Checker:
    """Gathers the problems found while loading one file, each naming file, line and key path,
    so every mistake is reported at once; `typed` reads one key checked for its type."""

    def __init__(self, loc: Located):
        self.loc, self.problems = loc, []

    def fail(self, path: str, message: str) -> None:
        self.problems.append(f"{self.loc.where(path)}: {path or '(top)'}: {message}")

    @overload
    def typed(self, data: Mapping, key: str, path: str, kind: type[_T], default: _T) -> _T: ...
    @overload
    def typed(self, data: Mapping, key: str, path: str, kind: type[_T], default: None = None) -> _T | None: ...
    @overload
    def typed(self, data: Mapping, key: str, path: str, kind: tuple[type, ...], default: Any = None) -> Any: ...

    def typed(self, data: Mapping, key: str, path: str, kind, default=None):
        if key not in data or data[key] is None:
            return default
        value = data[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind in (int, float) and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            self.fail(f"{path}.{key}", f"must be {_KIND_NAMES.get(names, names)}, got {type(value).__name__} {value!r}")
            return default
        return value

    def unknown_keys(self, data: Mapping, allowed: set, path: str) -> None:
        for key in data:
            if key not in allowed:
                self.fail(f"{path}.{key}" if path else key, f"unknown key (allowed: {', '.join(sorted(allowed))})")


def load(path: str | os.PathLike | None = None) -> Config:
    """Load a troupe YAML config or a Claude-style {"mcpServers": …} JSON file."""
    file = Path(path) if path else DEFAULT_CONFIG
    loc = read(file)
    return from_data(loc.data, file=str(file), located=loc)


def file_of(config: Config) -> str | None:
    """The absolute path of the file `config` was loaded from; None for the embedded default or a dict."""
    if not config.path or config.path.startswith("<"):
        return None
    path = os.path.abspath(config.path)
    return None if path == os.path.abspath(DEFAULT_CONFIG) else path


def from_data(data: Any, file: str = "<dict>", located: Located | None = None) -> Config:
    loc = located or Located(data, {}, file)
    check = _Checker(loc)
    base = Path(file).resolve().parent if file.startswith("<") is False else Path.cwd()
    builtins = {"TROUPE_PYTHON": sys.executable, "TROUPE_CONFIG_DIR": str(base)}
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError([f"{loc.where('')}: (top): must be a mapping with `servers:` or `mcpServers:`"])
    if "mcpServers" in data:
        servers = _claude_servers(data, check, builtins, base)
        check.unknown_keys(data, {"mcpServers", "serve", "discovery", "trust", "cluster", "profiles", "cache",
                                  "telemetry", *_WORKFLOW_KEYS, *_OPS_KEYS}, "")
    else:
        check.unknown_keys(data, {"servers", "serve", "discovery", "store", "trust", "cluster", "profiles", "cache",
                                  "telemetry", *_WORKFLOW_KEYS, *_OPS_KEYS}, "")
        raw = data.get("servers") or []
        if not isinstance(raw, list):
            check.fail("servers", "must be a list of servers")
            raw = []
        servers = []
        for i, item in enumerate(raw):
            server = _server(item, f"servers[{i}]", check, builtins, base)
            if server is None:
                continue
            if any(s.name == server.name for s in servers):
                check.fail(f"servers[{i}].name", f"duplicate server name {server.name!r}")
            servers.append(server)
    profiles = profiles_mod.parse(data.get("profiles"), check)
    serve = serve_section.parse(data.get("serve") or {}, check, expand, profiles)
    discovery = data.get("discovery") or {}
    if not isinstance(discovery, dict):
        check.fail("discovery", "must be a mapping")
        discovery = {}
    approvals_file = _trust(data.get("trust"), check, builtins, base)
    cluster = cluster_settings.parse(data.get("cluster"), check.fail, lambda text: expand(text, builtins))
    workflows, workflows_dir = workflows_section.parse(data, loc, check.fail, lambda text: expand(text, builtins), base)
    cache = cache_section.store(data.get("cache"), check.fail)
    audit = audit_section.parse(data.get("audit"), check, lambda text: expand(text, builtins), base)
    rates = rate_section.parse(data, check.fail)
    telemetry = trace_settings.parse(data.get("telemetry"), check.fail)
    if check.problems:
        raise ConfigError(check.problems)
    return Config(tuple(servers), serve, MappingProxyType(discovery), file, approvals_file, cluster, profiles,
                  workflows, workflows_dir, cache, rates, telemetry, audit=audit)


def _trust(data: Any, check: _Checker, builtins, base: Path) -> str | None:
    """The `trust:` section: where approvals and tool pins are kept."""
    if data is None:
        return None
    if not isinstance(data, dict):
        check.fail("trust", "must be a mapping")
        return None
    check.unknown_keys(data, {"approvals_file"}, "trust")
    path = check.typed(data, "approvals_file", "trust", str, None)
    return str((base / os.path.expanduser(expand(path, builtins))).resolve()) if path else None


def _server(item: Any, path: str, check: _Checker, builtins, base: Path) -> ServerConfig | None:
    if not isinstance(item, dict):
        check.fail(path, "must be a mapping with name and transport")
        return None
    check.unknown_keys(item, {"name", "enabled", "auto_start", "timeout", "prefix", "transport",
                              "max_in_flight", "max_queued", "restart", "max_message_bytes", "retry_idempotent_tools",
                              "pin", "placement", "auth", "cache", "share", "max_tools", "max_tool_bytes",
                              "tasks", "rate", "start", "idle_stop"}, path)
    name = check.typed(item, "name", path, str)
    if not name:
        check.fail(f"{path}.name", "is required")
        return None
    if not SERVER_NAME.match(name):
        check.fail(f"{path}.name", f"{name!r} must match {SERVER_NAME.pattern}")
    timeout = check.typed(item, "timeout", path, float, 30.0)
    if timeout is not None and timeout <= 0:
        check.fail(f"{path}.timeout", "must be > 0 seconds")
    prefix = check.typed(item, "prefix", path, str, None)
    if prefix and not re.fullmatch(r"[A-Za-z0-9_-]+", prefix):
        check.fail(f"{path}.prefix", "may hold only letters, digits, _ and -")
    transport = item.get("transport")
    if not isinstance(transport, dict):
        check.fail(f"{path}.transport", "is required: {type: stdio|sse|streamable-http, …}")
        return None
    tpath = f"{path}.transport"
    kind = transport.get("type", "stdio")
    if kind not in TRANSPORT_TYPES:
        check.fail(f"{tpath}.type", f"{kind!r} is not one of {', '.join(TRANSPORT_TYPES)}")
        return None
    check.unknown_keys(transport, {"type", "stdio", "sse", "streamable_http"}, tpath)
    stdio = http = None
    if kind == "stdio":
        stdio = _stdio(transport.get("stdio"), f"{tpath}.stdio", check, builtins, base)
    else:
        key = "sse" if kind == "sse" else "streamable_http"
        http = _http(transport.get(key), f"{tpath}.{key}", check, builtins)
    restart = item.get("restart") or {}
    policy = PolicySpec()
    if isinstance(restart, dict):
        check.unknown_keys(restart, {"intensity", "period", "min_backoff", "max_backoff", "hung_after"},
                           f"{path}.restart")
        policy = PolicySpec(check.typed(restart, "intensity", f"{path}.restart", int),
                            check.typed(restart, "period", f"{path}.restart", float),
                            check.typed(restart, "min_backoff", f"{path}.restart", float),
                            check.typed(restart, "max_backoff", f"{path}.restart", float),
                            check.typed(restart, "hung_after", f"{path}.restart", int))
        if (policy.hung_after or 0) < 0:
            check.fail(f"{path}.restart.hung_after", "must be >= 0 (0: never restart a server for timeouts)")
    else:
        check.fail(f"{path}.restart", "must be a mapping")
    return ServerConfig(
        name=name, transport=kind, stdio=stdio, http=http, enabled=check.typed(item, "enabled", path, bool, True),
        auto_start=check.typed(item, "auto_start", path, bool, True),
        timeout=timeout or 30.0, prefix=prefix,
        max_in_flight=check.typed(item, "max_in_flight", path, int, 64), policy=policy,
        max_queued=check.typed(item, "max_queued", path, int, 1000),
        max_message_bytes=check.typed(item, "max_message_bytes", path, int, 16 * 1024 * 1024),
        retry_idempotent_tools=check.typed(item, "retry_idempotent_tools", path, bool, False),
        pin=check.typed(item, "pin", path, bool, True),
        placement=cluster_settings.placement(check.typed(item, "placement", path, str), path, check.fail),
        auth=_auth(item, kind, path, check),
        cache=cache_section.server(item.get("cache"), f"{path}.cache", check.fail),
        share=_share(check.typed(item, "share", path, str, SHARE_ALL), path, check),
        task_max_duration=tasks_section.server_max_duration(item, path, check),
        **start_section.server_start(item, path, check), **_list_limits(item, path, check))


def _list_limits(item: dict, path: str, check: _Checker) -> dict:
    """max_tools and max_tool_bytes: what of a server's tool list troupe serves, each an integer >= 1."""
    limits = {}
    for key, default, unit in (("max_tools", DEFAULT_MAX_TOOLS, "tools"),
                               ("max_tool_bytes", DEFAULT_MAX_TOOL_BYTES, "bytes of one tool's JSON definition")):
        value = check.typed(item, key, path, int, default)
        if value < 1:
            check.fail(f"{path}.{key}", f"must be an integer >= 1 ({unit}), got {value!r}")
            value = default
        limits[key] = value
    return limits


def _share(value: str | None, path: str, check: _Checker) -> str:
    """`share: all` (one upstream for everyone) or `share: per_client` (each client its own)."""
    if value is not None and value not in SHARES:
        check.fail(f"{path}.share", f"{value!r} is not one of {', '.join(SHARES)}")
    return value if value in SHARES else SHARE_ALL


def _auth(item: Mapping, kind: str, path: str, check: _Checker):
    if kind == "stdio" and item.get("auth") is not None:
        check.fail(f"{path}.auth", "OAuth is for HTTP servers (sse, streamable-http)")
        return None
    return upstream_auth.parse(item.get("auth"), f"{path}.auth", check.fail)


def _str_map(value: Any, path: str, check: _Checker, builtins) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        check.fail(path, "must be a mapping of names to strings")
        return {}
    out = {}
    for k, v in value.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            v = str(v)
        if not isinstance(v, str):
            check.fail(f"{path}.{k}", "must be a string")  # never echo the value: it may be a secret
            continue
        out[str(k)] = expand(v, builtins)
    return out


def _stdio(spec: Any, path: str, check: _Checker, builtins, base: Path) -> StdioSpec | None:
    if not isinstance(spec, dict):
        check.fail(path, "is required for type stdio: {command: …, args: […]}")
        return None
    check.unknown_keys(spec, {"command", "args", "env", "work_dir", "cwd"}, path)
    command = check.typed(spec, "command", path, str)
    if not command:
        check.fail(f"{path}.command", "is required")
        return None
    args = spec.get("args") or []
    if not isinstance(args, list):
        check.fail(f"{path}.args", "must be a list of strings")
        args = []
    args = [expand(str(a), builtins) for a in args]
    work_dir = spec.get("work_dir", spec.get("cwd"))
    if work_dir is not None:
        work_dir = str((base / expand(str(work_dir), builtins)).resolve())
    return StdioSpec(expand(command, builtins), tuple(args),
                     MappingProxyType(_str_map(spec.get("env"), f"{path}.env", check, builtins)), work_dir)


def _http(spec: Any, path: str, check: _Checker, builtins) -> HttpSpec | None:
    if not isinstance(spec, dict):
        check.fail(path, "is required: {url: http://…, headers: {…}}")
        return None
    check.unknown_keys(spec, {"url", "headers"}, path)
    url = check.typed(spec, "url", path, str)
    if not url or not re.match(r"^https?://", url):
        check.fail(f"{path}.url", "must be an http:// or https:// URL")
        return None
    headers = _str_map(spec.get("headers"), f"{path}.headers", check, builtins)
    return HttpSpec(expand(url, builtins), MappingProxyType(headers))


def _claude_servers(data: dict, check: _Checker, builtins, base: Path) -> list[ServerConfig]:
    """Claude Desktop / Cursor style: {"mcpServers": {name: {command,args,env}|{url,headers,type}}}."""
    raw = data["mcpServers"]
    if not isinstance(raw, dict):
        check.fail("mcpServers", "must be a mapping of server names to definitions")
        return []
    servers = []
    for name, spec in raw.items():
        item = claude_entry_to_server(name, spec)
        if item is None:
            check.fail(f"mcpServers.{name}", "needs `command` (stdio) or `url` (http)")
            continue
        s = _server(item, f"mcpServers.{name}", check, builtins, base)
        if s:
            servers.append(s)
    return servers


def transport_item(spec: dict) -> dict:
    """troupe's `transport:` mapping for a common entry: {transport: stdio, command, args, env, cwd}
    or {transport: sse | streamable-http, url, headers} (a client file's entry, normalised)."""
    if spec.get("transport") == "stdio":
        stdio: dict[str, Any] = {"command": spec["command"], "args": spec.get("args") or []}
        if spec.get("env"):
            stdio["env"] = spec["env"]
        if spec.get("cwd"):
            stdio["work_dir"] = spec["cwd"]
        return {"type": "stdio", "stdio": stdio}
    key = "sse" if spec["transport"] == "sse" else "streamable_http"
    return {"type": spec["transport"], key: {"url": spec["url"], "headers": spec.get("headers") or {}}}


def claude_entry_to_server(name: str, spec: Any) -> dict | None:
    """One mcpServers entry (a Claude-style config given as troupe's own) in troupe's server shape."""
    if not isinstance(spec, dict):
        return None
    item: dict[str, Any] = {"name": name}
    if spec.get("disabled") is True:
        item["enabled"] = False
    if "command" in spec:
        item["transport"] = transport_item({**spec, "transport": "stdio"})
        return item
    url = spec.get("url") or spec.get("serverUrl")
    if url:
        kind = str(spec.get("type") or spec.get("transport") or "").lower()
        transport = "sse" if kind == "sse" else "streamable-http"
        item["transport"] = transport_item({**spec, "url": url, "transport": transport})
        return item
    return None


def with_overrides(config: Config, redis: str | None = None, **serve_overrides) -> Config:
    """Apply CLI flags (None = keep) on top of the file's serve section; `redis` joins a cluster
    (or points the file's cluster at another Redis)."""
    changes = {k: v for k, v in serve_overrides.items() if v is not None}
    if changes.get("profile") is not None and changes["profile"] not in config.profiles:
        known = ", ".join(sorted(config.profiles)) or "none defined"
        raise ConfigError([f"--profile: no profile named {changes['profile']!r} (profiles: {known})"])
    if changes:
        config = replace(config, serve=replace(config.serve, **changes))
    if redis is not None:
        try:
            config = replace(config, cluster=cluster_settings.with_redis(config.cluster, redis, config.serve.transport))
        except ValueError as exc:
            raise ConfigError(list(exc.args)) from None
    elif config.cluster is not None and config.serve.transport != "http":
        raise ConfigError(["cluster: instances reach each other over HTTP: set serve.transport: http"])
    if cache_section.check_backend(config.cache, config.cluster):
        raise ConfigError(cache_section.check_backend(config.cache, config.cluster))
    return config
