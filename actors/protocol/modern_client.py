"""troupe as a client of the stateless MCP era (2026-07-28): the per-request `_meta` envelope,
the HTTP headers that mirror it, the era verdict of a `server/discover` probe, and the checks
a client owes a modern server's lists (x-mcp-header). Pure functions: the Connection and the
HTTP transport call them, nothing here holds state.
"""
from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

from actors.protocol import jsonrpc, mcp, modern
from actors.protocol.header_params import annotated
from actors.protocol.modern import (
    HEADER_MISMATCH,
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_VERSION,
    MISSING_CAPABILITY,
    UNSUPPORTED_VERSION,
)

MODERN_VERSION = mcp.MODERN
MODERN_VERSIONS = mcp.MODERN_VERSIONS
DISCOVER = "server/discover"
LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"

# The envelope's keys and the revision's error codes: one definition, shared with serving.
META_SUBSCRIPTION = modern.META_PREFIX + "subscriptionId"
# Each of the revision's own error codes is positive evidence that the peer speaks it.
MODERN_ERRORS = (HEADER_MISMATCH, MISSING_CAPABILITY, UNSUPPORTED_VERSION)

VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
PARAM_HEADER_PREFIX = "Mcp-Param-"
# Which params field each name-bearing method mirrors into Mcp-Name.
# (SEP-2663: a task request names its task, so that an intermediary routes it to the instance holding it.)
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
                "tasks/update": "taskId", "tasks/cancel": "taskId"}

# Server capabilities troupe implements for its clients; anything else a modern server declares
# (experimental, extensions troupe does not carry) is not forwarded, since nothing behind troupe backs it.
FORWARDED_CAPABILITIES = ("tools", "resources", "prompts", "completions", "logging")

MODERN, LEGACY = "modern", "legacy"

_HEADER_SAFE = re.compile(r"^[\x20-\x7E]*$")
_B64_SENTINEL = re.compile(r"^=\?base64\?.*\?=$")


class Incompatible(Exception):
    """The server speaks only modern versions troupe does not know: no era can be spoken."""


def envelope(params: Any, capabilities: Mapping | None = None, log_level: str | None = None) -> dict:
    """params with the modern `_meta` envelope added (the caller's own _meta keys kept):
    the version, the capabilities relayed for this request ({} for troupe's own), troupe's identity."""
    out = dict(params) if isinstance(params, dict) else {}
    meta = dict(out.get("_meta") or {})
    meta[META_VERSION] = MODERN_VERSION
    meta[META_CAPABILITIES] = dict(capabilities or {})
    meta[META_CLIENT_INFO] = mcp.CLIENT_INFO
    if log_level is not None:
        meta.setdefault(META_LOG_LEVEL, log_level)
    out["_meta"] = meta
    return out


def relayable(capabilities: Any) -> dict:
    """The part of a calling client's capabilities troupe may relay upstream: sampling and the
    like, and the extensions troupe carries (MCP Apps, tasks), each with the settings the client gave."""
    return _carried(capabilities, mcp.RELAY_CAPABILITIES)


def forwarded_capabilities(capabilities: Any) -> dict:
    """A modern server's capabilities less what troupe does not implement: of its extensions, the
    ones troupe carries (MCP Apps, tasks: what the catalogue and the TaskKeeper read), no others."""
    return _carried(capabilities, FORWARDED_CAPABILITIES)


def _carried(capabilities: Any, kept: tuple) -> dict:
    """The `kept` capabilities and, of the extensions, those troupe carries (each an object)."""
    if not isinstance(capabilities, Mapping):
        return {}
    out = {k: v for k, v in capabilities.items() if k in kept}
    extensions = capabilities.get("extensions")
    if isinstance(extensions, Mapping):
        carried = {k: v for k, v in extensions.items() if k in mcp.RELAYED_EXTENSIONS and isinstance(v, Mapping)}
        if carried:
            out["extensions"] = carried
    return out


def verdict(outcome: Any) -> str:
    """The era a `server/discover` answer shows: MODERN for a DiscoverResult naming a modern
    version or a recognised modern error; LEGACY for anything else (never keyed to one error
    code, as the spec says). Incompatible for a modern-only server with no version in common."""
    if isinstance(outcome, dict):
        supported = outcome.get("supportedVersions")
        if isinstance(supported, list) and any(v in MODERN_VERSIONS for v in supported):
            return MODERN
        return LEGACY  # discover answered but advertises only the session era: a legacy server
    code, data = getattr(outcome, "code", None), getattr(outcome, "data", None)
    if code == UNSUPPORTED_VERSION:
        supported = data.get("supported") if isinstance(data, dict) else None
        if isinstance(supported, list) and supported:
            if any(v in MODERN_VERSIONS for v in supported):
                return MODERN
            if not any(v in mcp.SUPPORTED_VERSIONS for v in supported):
                raise Incompatible(f"server speaks only {', '.join(map(str, supported))}; troupe speaks "
                                   f"{', '.join((*MODERN_VERSIONS, *mcp.SUPPORTED_VERSIONS))}")
        return LEGACY
    if code in (HEADER_MISMATCH, MISSING_CAPABILITY):
        return MODERN
    return LEGACY


def refused_initialize(outcome: Any) -> bool:
    """An `initialize` answered with the modern "unsupported version" error naming a modern
    version: the server is modern (a probe that timed out on a slow starter, say)."""
    data = getattr(outcome, "data", None)
    supported = data.get("supported") if isinstance(data, dict) else None
    return (getattr(outcome, "code", None) == UNSUPPORTED_VERSION and isinstance(supported, list)
            and any(v in MODERN_VERSIONS for v in supported))


def encode_header_value(value: str) -> str:
    """A value as an HTTP field value: verbatim if plain printable ASCII, else `=?base64?…?=`."""
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not _B64_SENTINEL.fullmatch(value):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


def header_map(input_schema: Any) -> tuple[tuple[tuple, str], ...]:
    """((property path, header token), …) of a valid tool schema's x-mcp-header annotations."""
    return tuple((path, token) for path, token, _ in annotated(input_schema))


def request_headers(message: dict, tool_headers: Mapping[str, tuple] | None = None) -> dict:
    """The modern HTTP headers that mirror a request: version, method, name, and the
    Mcp-Param-* headers of the called tool's annotated arguments."""
    method = message.get("method")
    raw = message.get("params")
    params: dict = raw if isinstance(raw, dict) else {}
    headers = {VERSION_HEADER: MODERN_VERSION}
    if not isinstance(method, str):
        return headers
    headers[METHOD_HEADER] = method
    key = NAME_BEARING.get(method)
    name = params.get(key) if key else None
    if isinstance(name, str):
        headers[NAME_HEADER] = encode_header_value(name)
    if method == "tools/call" and isinstance(name, str) and tool_headers:
        given = params.get("arguments")
        arguments: dict = given if isinstance(given, dict) else {}
        for path, token in tool_headers.get(name, ()):
            value: Any = arguments
            for step in path:
                value = value.get(step) if isinstance(value, dict) else None
            if isinstance(value, bool):
                headers[PARAM_HEADER_PREFIX + token] = "true" if value else "false"
            elif isinstance(value, (str, int, float)):
                headers[PARAM_HEADER_PREFIX + token] = encode_header_value(str(value))
    return headers


def is_modern_error_body(body: Any) -> bool:
    """A JSON-RPC error object as a modern server sends with a 4xx (a body, not an HTML page)."""
    return (isinstance(body, dict) and isinstance(body.get("error"), dict)
            and isinstance(body["error"].get("code"), int) and "result" not in body
            and body.get("jsonrpc") == "2.0")


def outage(outcome: Any) -> bool:
    """An answer that says nothing about the era: a timeout or a connection that failed before
    any HTTP status (troupe's own synthetic error without an httpStatus)."""
    code, data = getattr(outcome, "code", None), getattr(outcome, "data", None)
    if code == jsonrpc.REQUEST_TIMEOUT:
        return True
    return code == jsonrpc.SERVER_UNAVAILABLE and not (isinstance(data, dict) and data.get("httpStatus"))
