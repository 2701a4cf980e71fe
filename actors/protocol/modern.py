"""The stateless 2026-07-28 revision as troupe serves it: what marks a request as modern, how its
`_meta` is checked, and what every modern result carries (resultType, caching hints, serverInfo)."""
from __future__ import annotations

from typing import Any

from actors.protocol import jsonrpc, mcp

META_PREFIX = "io.modelcontextprotocol/"
META_VERSION = META_PREFIX + "protocolVersion"
META_CAPABILITIES = META_PREFIX + "clientCapabilities"
META_CLIENT_INFO = META_PREFIX + "clientInfo"
META_LOG_LEVEL = META_PREFIX + "logLevel"
META_SERVER_INFO = META_PREFIX + "serverInfo"

# The revision's own error codes (-32020..-32099 are reserved for the spec).
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022

# Methods the revision removed: a modern request for one is "method not found".
REMOVED = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
# Caching hints: the catalogue is the same for every client (public) and changes when servers
# come and go; a read from an upstream is that upstream's answer now (private, not to be reused).
LIST_TTL_MS = 30_000
DISCOVER_TTL_MS = 300_000
CACHED_LISTS = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list"})


def is_modern(params: Any) -> bool:
    """A request is served statelessly when its _meta names a protocol version."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_VERSION in meta


def check_meta(rid, method: str, params: dict) -> dict | None:
    """None if the request's _meta is acceptable, else the error response to send."""
    meta = params["_meta"]
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"_meta.{META_VERSION} must be a string")
    if version not in mcp.MODERN_VERSIONS:
        return jsonrpc.error(rid, UNSUPPORTED_VERSION, f"unsupported protocol version {version!r}",
                             {"supported": list(mcp.MODERN_VERSIONS), "requested": version})
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"_meta.{META_CAPABILITIES} is required (an object)")
    if META_CLIENT_INFO in meta and not isinstance(meta[META_CLIENT_INFO], dict):
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"_meta.{META_CLIENT_INFO} must be an object")
    if META_LOG_LEVEL in meta and meta[META_LOG_LEVEL] not in mcp.LOG_LEVELS:
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS,
                             f"_meta.{META_LOG_LEVEL} must be one of {', '.join(mcp.LOG_LEVELS)}")
    if method in REMOVED:
        return jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"method not found: {method} (removed in {version})")
    return None


def without_envelope(params: dict) -> dict:
    """params without the envelope's keys, which are troupe's to read, not an upstream's: a dual-era
    upstream in a legacy session must not take a forwarded call for a modern one."""
    meta = {k: v for k, v in params["_meta"].items() if not k.startswith(META_PREFIX)}
    out = {k: v for k, v in params.items() if k != "_meta"}
    if meta:
        out["_meta"] = meta
    return out


def capabilities() -> dict:
    """What troupe backs for a modern client: no listChanged or subscribe (no subscriptions/listen
    stream yet), no logging (per-request log levels are not relayed yet)."""
    return {"tools": {}, "resources": {}, "prompts": {}, "completions": {}}


def discover_result(instructions: str) -> dict:
    """server/discover: every version troupe speaks (modern first), for either era's client."""
    return {"supportedVersions": [*mcp.MODERN_VERSIONS, *mcp.SUPPORTED_VERSIONS],
            "capabilities": capabilities(), "serverInfo": mcp.SERVER_INFO, "instructions": instructions,
            "resultType": "complete", "ttlMs": DISCOVER_TTL_MS, "cacheScope": "public"}


def finish(method: str, result: dict) -> dict:
    """A modern result: resultType, troupe's serverInfo in _meta, and caching hints for lists and reads."""
    out = dict(result)
    out.setdefault("resultType", "complete")
    meta = dict(out.get("_meta") or {})
    meta.setdefault(META_SERVER_INFO, mcp.SERVER_INFO)
    out["_meta"] = meta
    if method in CACHED_LISTS:
        out.setdefault("ttlMs", LIST_TTL_MS)
        out.setdefault("cacheScope", "public")
    elif method == "resources/read":
        out["ttlMs"], out["cacheScope"] = 0, "private"  # an upstream's answer, for this caller, now
    return out


def finishing_sink(rid, method: str, sink):
    """The sink a modern request is answered through: its own result gets finish(); anything
    else (progress, errors, other requests' answers) passes unchanged."""
    def modern(message) -> None:
        if isinstance(message, dict) and message.get("id") == rid and isinstance(message.get("result"), dict) \
                and "method" not in message:
            message = {**message, "result": finish(method, message["result"])}
        sink(message)
    return modern
