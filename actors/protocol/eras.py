"""Which result fields belong to one era only, and the shape of a result for a client of the
other: what the 2026-07-28 schema added (removed for a legacy session's client) and what it
dropped (removed for a modern request's). The lists follow the two schemas (schema/2025-11-25 and
schema/2026-07-28 of the spec), result by result; anything else passes unchanged, `_meta` keys
included (the spec says to pass unknown ones through)."""
from __future__ import annotations

from typing import Any

# Top-level result fields only the modern schema has: Result.resultType (every result) and
# CacheableResult.ttlMs / cacheScope (list, read and discover results).
MODERN_RESULT_FIELDS = ("resultType", "ttlMs", "cacheScope")
# ResultMetaObject's own keys (serverInfo on every result, subscriptionId on a listen's). Spelled
# out here, not imported from actors.protocol.modern, which shapes its results with this module.
_SERVER_INFO, _SUBSCRIPTION = "io.modelcontextprotocol/serverInfo", "io.modelcontextprotocol/subscriptionId"
MODERN_RESULT_META = (_SERVER_INFO, _SUBSCRIPTION)
# What 2025-11-25 has and 2026-07-28 moved into the tasks extension: a result's related-task key
# and a tool's `execution` (its taskSupport), in tools/list.
LEGACY_RESULT_META = ("io.modelcontextprotocol/related-task",)
LEGACY_TOOL_FIELDS = ("execution",)


def for_legacy(result: dict) -> dict:
    """`result` as a client of the handshake era (2024-11-05 … 2025-11-25) may see it: without
    the modern-only fields and `_meta` keys. The same object when it has none (the common case: a
    legacy upstream's answer costs four lookups); a copy otherwise, never changed in place (an
    outcome may be cached, or shared with another call's answer)."""
    out = None
    if "resultType" in result or "ttlMs" in result or "cacheScope" in result:
        out = result.copy()
        for key in MODERN_RESULT_FIELDS:
            out.pop(key, None)
    meta = result.get("_meta")
    if type(meta) is dict and (_SERVER_INFO in meta or _SUBSCRIPTION in meta):  # no generator: a hot path
        if out is None:
            out = result.copy()
        meta = meta.copy()
        for key in MODERN_RESULT_META:
            meta.pop(key, None)
        if meta:
            out["_meta"] = meta
        else:
            del out["_meta"]
    return result if out is None else out


def legacy_meta_dropped(meta: dict) -> dict:
    """A modern result's `_meta` (a copy troupe owns) without the keys only the handshake era has."""
    for key in LEGACY_RESULT_META:
        meta.pop(key, None)
    return meta


def modern_tools(tools: Any) -> Any:
    """A tools/list page for a modern client: each tool without the fields only the handshake era
    has. The same list when no tool has one; tools that have one are copied, never changed in place."""
    if not isinstance(tools, list) or not any(type(t) is dict and _has_legacy_field(t) for t in tools):
        return tools
    return [{k: v for k, v in t.items() if k not in LEGACY_TOOL_FIELDS}
            if type(t) is dict and _has_legacy_field(t) else t for t in tools]


def _has_legacy_field(tool: dict) -> bool:
    return any(key in tool for key in LEGACY_TOOL_FIELDS)
