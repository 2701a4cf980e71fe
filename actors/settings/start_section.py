"""A server's `start:` and `idle_stop:` (servers on demand), and `discovery.start`.
Checked with the config loader's checker, so every problem names its file, line and key."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from actors.settings.model import DEFAULT_IDLE_STOP_S, START_ALWAYS, START_MODES, START_ON_DEMAND

if TYPE_CHECKING:
    from actors.settings.config import _Checker


def server_start(item: dict, path: str, check: _Checker, default: str = START_ALWAYS) -> dict:
    """`start: always | on_demand` and `idle_stop: SECONDS` of one server, as ServerConfig fields.
    An `idle_stop` on its own implies on_demand; `start: on_demand` alone stops after the default."""
    start = item.get("start")
    if start is not None and start not in START_MODES:
        check.fail(f"{path}.start", f"{start!r} is not one of {', '.join(START_MODES)}")
        start = None
    idle = item.get("idle_stop")
    if idle is not None and (isinstance(idle, bool) or not isinstance(idle, (int, float))
                             or not math.isfinite(idle) or idle <= 0):
        check.fail(f"{path}.idle_stop", f"must be > 0 seconds, got {idle!r}")
        idle = None
    if start == START_ALWAYS and idle is not None:
        check.fail(f"{path}.idle_stop", "is for `start: on_demand` servers (this one has `start: always`)")
        idle = None
    if start is None:
        start = START_ON_DEMAND if idle is not None else default
    return {"start": start, "idle_stop": float(idle) if idle is not None else DEFAULT_IDLE_STOP_S}


def discovery_start(data: Any, check: _Checker) -> str:
    """`discovery.start`: how the servers found in client configs start (default always)."""
    value = data.get("start") if isinstance(data, dict) else None
    if value is None:
        return START_ALWAYS
    if value not in START_MODES:
        check.fail("discovery.start", f"{value!r} is not one of {', '.join(START_MODES)}")
        return START_ALWAYS
    return value
