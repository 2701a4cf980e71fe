"""Digests of tool and prompt definitions, and a readable diff between two definitions."""
from __future__ import annotations

import hashlib
from typing import Any, Mapping

import orjson

# What a definition's meaning is made of; anything else (icons, _meta) may change freely.
TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
PROMPT_FIELDS = ("name", "title", "description", "arguments")
FIELDS = {"tools": TOOL_FIELDS, "prompts": PROMPT_FIELDS}
MAX_DIFF_LINES = 80


def essence(kind: str, definition: Mapping[str, Any]) -> dict:
    return {k: definition[k] for k in FIELDS[kind] if k in definition}


def digest(kind: str, definition: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of the fields that carry meaning."""
    blob = orjson.dumps(essence(kind, definition), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()


def diff(kind: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> str:
    """A unified diff of the two definitions' meaningful fields (the whole text for a new one)."""
    def lines(d):
        if d is None:
            return []
        return orjson.dumps(essence(kind, d), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2).decode().splitlines()
    import difflib  # only when a pinned definition changed
    out = list(difflib.unified_diff(lines(before), lines(after), "approved", "now listed", lineterm="", n=2))
    if len(out) > MAX_DIFF_LINES:
        out = out[:MAX_DIFF_LINES] + [f"… {len(out) - MAX_DIFF_LINES} more lines"]
    return "\n".join(out)
