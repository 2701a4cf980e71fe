"""Which result fields belong to one era only, and the shape of a result for a client of the
other: what the 2026-07-28 schema added (removed for a legacy session's client) and what it
dropped (removed for a modern request's), and the two shapes 2026-07-28 widened (a tool's
outputSchema, a result's structuredContent), narrowed again for a legacy client. The lists
follow the two schemas (schema/2025-11-25 and schema/2026-07-28 of the spec), result by result;
anything else passes unchanged, `_meta` keys included (the spec says to pass unknown ones through)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Sequence

import orjson

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
# Shapes, not fields: 2025-11-25 wants a tool's outputSchema to be an object schema (`type:
# "object"`) and structuredContent to be an object; 2026-07-28 allows any schema and any JSON.
# The SDK's legacy client refuses a whole tools/list over one such tool.


def for_legacy(result: dict) -> dict:
    """`result` as a client of the handshake era (2024-11-05 … 2025-11-25) may see it: without
    the modern-only fields and `_meta` keys, nor a structuredContent that is not an object. The
    same object when it has none (the common case: a legacy upstream's answer costs five
    lookups); a copy otherwise, never changed in place (an outcome may be cached, or shared with
    another call's answer)."""
    out = None
    if "resultType" in result or "ttlMs" in result or "cacheScope" in result:
        out = result.copy()
        for key in MODERN_RESULT_FIELDS:
            out.pop(key, None)
    if "structuredContent" in result and type(result["structuredContent"]) is not dict:
        out = _without_structured(result if out is None else out)
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


def _without_structured(result: dict) -> dict:
    """A copy of a tool result whose structuredContent is no object, without it: the value is
    still there for the model as JSON text (the spec asks servers to send it so, and when the
    content is empty troupe writes it)."""
    out = result.copy()
    value = out.pop("structuredContent")
    if not out.get("content") and value is not None:
        out["content"] = [{"type": "text", "text": orjson.dumps(value).decode()}]
    return out


def legacy_tools(tools: Sequence) -> Sequence:
    """Tool definitions for a handshake-era client: an outputSchema that is not an object schema
    left out (its results reach such a client without structuredContent, see for_legacy). The
    same sequence when no tool has one; a tool that does is copied, never changed in place."""
    if not any(_modern_output(t) for t in tools):
        return tools
    return [{k: v for k, v in t.items() if k != "outputSchema"} if _modern_output(t) else t for t in tools]


def modern_tools(tools: Sequence) -> Sequence:
    """Tool definitions for a modern client: each without the fields only the handshake era has.
    The same sequence when no tool has one; a tool that does is copied, never changed in place."""
    if not any(_has_legacy_field(t) for t in tools):
        return tools
    return [{k: v for k, v in t.items() if k not in LEGACY_TOOL_FIELDS} if _has_legacy_field(t) else t
            for t in tools]


def _modern_output(tool: Any) -> bool:
    schema = tool.get("outputSchema", _ABSENT) if isinstance(tool, Mapping) else _ABSENT
    return schema is not _ABSENT and not (isinstance(schema, Mapping) and schema.get("type") == "object")


def _has_legacy_field(tool: Any) -> bool:
    return isinstance(tool, Mapping) and any(key in tool for key in LEGACY_TOOL_FIELDS)


_ABSENT = object()
