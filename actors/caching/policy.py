"""Which calls are cached, and for how long: the server's `cache:` (actors/settings/cache_section.py)
and the tool's own annotations decide. Only reads are cached: a tool annotated readOnlyHint: true,
or one the config names; and resources/read."""
from __future__ import annotations

from collections.abc import Mapping

from actors.settings.cache_section import ServerCache


def tool_ttl(cache: ServerCache | None, tool: str, definition: Mapping) -> float | None:
    """Seconds a result of `tool` (the server's own name) may be served again; None: never cached.
    A tool named in `cache.tools` takes its own ttl (0: never); any other tool is cached for the
    server's ttl only when it says it only reads (readOnlyHint: true)."""
    if cache is None:
        return None
    own = cache.tools.get(tool)
    if own is not None:
        return own or None
    annotations = definition.get("annotations")
    read_only = isinstance(annotations, Mapping) and annotations.get("readOnlyHint") is True
    return cache.ttl if read_only else None


def resource_ttl(cache: ServerCache | None) -> float | None:
    """Seconds a resources/read of this server may be served again; None: never cached."""
    if cache is None:
        return None
    ttl = cache.resources if cache.resources is not None else cache.ttl
    return ttl or None


def storable(outcome) -> bool:
    """Only a plain success is kept: not an error, not a tool result with isError, not a round
    that waits for the client's input (2026-07-28 input_required)."""
    if not isinstance(outcome, dict) or outcome.get("isError") is True:
        return False
    result_type = outcome.get("resultType")
    return result_type is None or result_type == "complete"
