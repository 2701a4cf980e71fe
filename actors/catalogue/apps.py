"""MCP Apps (SEP-1865) in the catalogue: the `ui://` resources a tool's `_meta` names, that
reference rewritten to the URI troupe serves the resource under, and who may see app-only tools.

A tool names its view with `_meta.ui.resourceUri` (and, in the form the spec deprecates,
`_meta["ui/resourceUri"]`); the host reads that URI with resources/read on the same server.
Behind troupe two servers may use the same `ui://` URI, so the catalogue gives each server's
resource one URI of its own (catalogue.snapshot.build) and each tool's reference is rewritten to
it here. A server need not list its view in resources/list (the spec lets it omit UI-only
resources), so a referenced URI is routed whether listed or not.
"""
from __future__ import annotations

from collections.abc import Mapping  # not typing.Mapping: its isinstance costs ~1 µs, per tool per build
from typing import Any, Callable

from actors.protocol import mcp

UI_SCHEME = "ui://"
DEPRECATED_KEY = "ui/resourceUri"  # the flat form, "removed before GA"; still read and rewritten
MODEL, APP = "model", "app"


def referenced_uris(tool: Mapping) -> tuple[str, ...]:
    """The `ui://` resource URIs a tool definition's `_meta` names (usually one), in order."""
    meta = tool.get("_meta")
    if not isinstance(meta, Mapping):
        return ()
    found = []
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and _is_ui(ui.get("resourceUri")):
        found.append(ui["resourceUri"])
    if _is_ui(meta.get(DEPRECATED_KEY)):
        found.append(meta[DEPRECATED_KEY])
    return tuple(dict.fromkeys(found))


def with_uris(tool: dict, exposed: Callable[[str], str]) -> dict:
    """`tool` with each `ui://` reference in its `_meta` replaced by exposed(uri); `tool` itself
    when nothing changes (the upstream's dicts are never changed in place)."""
    uris = referenced_uris(tool)
    if not uris or all(exposed(u) == u for u in uris):
        return tool
    meta = dict(tool["_meta"])
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and _is_ui(ui.get("resourceUri")):
        meta["ui"] = {**ui, "resourceUri": exposed(ui["resourceUri"])}
    if _is_ui(meta.get(DEPRECATED_KEY)):
        meta[DEPRECATED_KEY] = exposed(meta[DEPRECATED_KEY])
    return {**tool, "_meta": meta}


def app_only(tool: Mapping) -> bool:
    """A tool its server shows to the app alone: `_meta.ui.visibility` given and without "model".
    The spec has a host keep such a tool out of its model's tool list, yet let the app call it."""
    meta = tool.get("_meta")
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    visibility = ui.get("visibility") if isinstance(ui, Mapping) else None
    return isinstance(visibility, list) and MODEL not in visibility


def takes_apps(capabilities: Any) -> bool:
    """Whether a client's capabilities declare the MCP Apps extension (it renders views, and its
    host filters app-only tools out of its model's list itself)."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and isinstance(extensions.get(mcp.UI_EXTENSION), Mapping)


def _is_ui(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(UI_SCHEME)
