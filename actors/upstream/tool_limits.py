"""A server's tool list cut to its limits (`max_tools`, `max_tool_bytes`) before it reaches the
catalogue: what one server lists cannot make troupe's snapshot, search index or answers grow
without bound. What is refused is said once in the log and kept as notes for /status."""
from __future__ import annotations

from typing import Callable

import orjson

from actors.slicing import never, paced

NAMED = 5  # refused tools named in a note or log line; the rest are counted


def limited(tools: tuple, max_tools: int, max_bytes: int, between: Callable[[], None] = never,
            listed: int | None = None) -> tuple[tuple, tuple[str, ...]]:
    """(the tools kept, the notes saying what was refused). The first `max_tools` as listed are
    kept; of those, a definition over `max_bytes` of JSON is dropped. `listed`: how many the
    server listed, when `tools` holds only the first of them (UpstreamLists keeps max_tools + 1).
    `between()` runs after each tool sized (a slicing.Slices: 10,000 definitions take ~10 ms)."""
    notes = []
    listed = max(listed or 0, len(tools))
    if listed > max_tools:
        notes.append(f"listed {listed} tools; only the first {max_tools} are served (max_tools), "
                     f"{listed - max_tools} refused")
        tools = tools[:max_tools]
    kept, big = [], []
    for tool in paced(tools, between):
        size = _size(tool)
        if size > max_bytes:
            big.append((tool.get("name"), size))
        else:
            kept.append(tool)
    if big:
        named = ", ".join(f"{name!r} ({size} bytes)" for name, size in big[:NAMED])
        more = f" and {len(big) - NAMED} more" if len(big) > NAMED else ""
        notes.append(f"refused {len(big)} tool definition{'s' if len(big) > 1 else ''} over {max_bytes} bytes "
                     f"(max_tool_bytes): {named}{more}")
    return (tuple(kept) if big else tools), tuple(notes)


def _size(tool) -> int:
    try:
        return len(orjson.dumps(tool))
    except TypeError:  # not JSON (a transport handed on something odd): the catalogue drops it anyway
        return 0
