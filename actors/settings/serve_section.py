"""The `serve:` section of a config: how troupe faces its clients (transport, mode, address,
tokens and the clients they name, allowed hosts and origins, front limits). Checked with the
config loader's checker, so every problem names its file, line and key."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping

from actors.settings import profiles as profiles_mod
from actors.settings import tasks_section
from actors.settings.model import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_SESSION_IDLE_S,
    DEFAULT_STREAM_BUFFER_BYTES,
    MODES,
    SERVE_TRANSPORTS,
    ServeConfig,
)

if TYPE_CHECKING:
    from actors.settings.config import _Checker

# serve.allowed_hosts / allowed_origins are compared for equality: no wildcards, no paths.
_ALLOWED_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?$")
_ALLOWED_ORIGIN = re.compile(r"^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(:\d{1,5})?/?$")


def parse(data: Any, check: _Checker, expand: Callable[[str, Mapping[str, str]], str],
          profiles: Mapping) -> ServeConfig:
    """The `serve:` section, checked; `profiles` are the config's, which serve.clients and
    serve.profile must name."""
    if not isinstance(data, dict):
        check.fail("serve", "must be a mapping")
        return ServeConfig()
    check.unknown_keys(data, {"transport", "mode", "separator", "host", "port", "auth_token",
                              "allowed_origins", "allowed_hosts", "startup_wait", "json_response",
                              "client_admin", "session_idle", "max_sessions", "header_timeout",
                              "max_connections", "max_batch", "stream_buffer_bytes", "state_key", "clients",
                              "profile", "tasks", "rate"}, "serve")  # rate: settings/rate_section.py
    transport = check.typed(data, "transport", "serve", str, "stdio")
    if transport not in SERVE_TRANSPORTS:
        check.fail("serve.transport", f"{transport!r} is not one of {', '.join(SERVE_TRANSPORTS)}")
    mode = check.typed(data, "mode", "serve", str, "meta")
    if mode not in MODES:
        check.fail("serve.mode", f"{mode!r} is not one of {', '.join(MODES)}")
    sep = check.typed(data, "separator", "serve", str, "__")
    if not re.fullmatch(r"[A-Za-z0-9_-]{0,4}", sep or ""):
        check.fail("serve.separator", "must be up to 4 of A-Z a-z 0-9 _ -")
    port = check.typed(data, "port", "serve", int, 8765)
    if port is not None and not 0 <= port <= 65535:
        check.fail("serve.port", "must be 0..65535")
    token = data.get("auth_token")
    if token is not None and not isinstance(token, str):
        check.fail("serve.auth_token", "must be a string")  # never echo it: it is a secret
        token = None
    token = expand(token, {}) if token else os.environ.get("TROUPE_AUTH_TOKEN") or None
    state_key = data.get("state_key")
    if state_key is not None and (not isinstance(state_key, str) or len(state_key) < 16):
        check.fail("serve.state_key", "must be a string of at least 16 characters")  # a secret: never echoed
        state_key = None
    state_key = expand(state_key, {}) if state_key else os.environ.get("TROUPE_STATE_KEY") or None
    return ServeConfig(
        transport=transport, mode=mode, separator=sep, host=check.typed(data, "host", "serve", str, "127.0.0.1"),
        port=port, auth_token=token, state_key=state_key,
        allowed_origins=_allowed(data, "allowed_origins", _ALLOWED_ORIGIN, "an origin like http://localhost:3000",
                                 check),
        allowed_hosts=_allowed(data, "allowed_hosts", _ALLOWED_HOST, "a host name, optionally :port", check),
        startup_wait=check.typed(data, "startup_wait", "serve", float, 10.0),
        json_response=check.typed(data, "json_response", "serve", bool, False),
        client_admin=check.typed(data, "client_admin", "serve", bool, False),
        clients=profiles_mod.clients(data.get("clients"), check, profiles, expand),
        profile=profiles_mod.named(check.typed(data, "profile", "serve", str), "serve.profile", check, profiles),
        tasks=tasks_section.serve_tasks(data.get("tasks"), check),
        **_front_limits(data, check))


def _front_limits(data: dict, check: _Checker) -> dict:
    """serve.session_idle, max_sessions, header_timeout, max_connections, max_batch,
    stream_buffer_bytes: each a positive number."""
    limits = {}
    for key, kind, default, unit in (("session_idle", float, DEFAULT_SESSION_IDLE_S, "seconds"),
                                     ("max_sessions", int, DEFAULT_MAX_SESSIONS, "sessions"),
                                     ("header_timeout", float, DEFAULT_HEADER_TIMEOUT_S, "seconds"),
                                     ("max_connections", int, DEFAULT_MAX_CONNECTIONS, "connections"),
                                     ("max_batch", int, DEFAULT_MAX_BATCH, "requests in one batch"),
                                     ("stream_buffer_bytes", int, DEFAULT_STREAM_BUFFER_BYTES, "bytes")):
        value = check.typed(data, key, "serve", kind, default)
        if not value > 0:  # NaN too
            check.fail(f"serve.{key}", f"must be > 0 {unit}, got {value!r}")
            value = default
        limits[key] = value
    return limits


def _allowed(data: dict, key: str, shape: re.Pattern, example: str, check: _Checker) -> tuple:
    """A serve.allowed_* list: each entry is matched for equality, so a pattern would silently never match."""
    entries = check.typed(data, key, "serve", list, []) or []
    for i, entry in enumerate(entries):
        if not isinstance(entry, str) or not shape.match(entry):
            check.fail(f"serve.{key}[{i}]", f"must be {example} (compared for equality), got {entry!r}")
    return tuple(e for e in entries if isinstance(e, str) and shape.match(e))
