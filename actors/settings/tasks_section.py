"""serve.tasks and a server's own `tasks:`: how troupe relays and mints tasks (actors/tasks).
Checked with the config loader's checker, so every problem names its file, line and key."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from actors.settings.model import TasksConfig

if TYPE_CHECKING:
    from actors.settings.config import _Checker

_DEFAULTS = TasksConfig()
_POSITIVE = (("ttl", float, "seconds"), ("max_duration", float, "seconds"), ("max_per_client", int, "tasks"),
             ("max_result_bytes", int, "bytes"), ("max_bytes", int, "bytes"), ("poll_interval_ms", int, "ms"))


def serve_tasks(data: Any, check: _Checker) -> TasksConfig:
    """serve.tasks: mint_after (seconds, 0 = at once, false = never), ttl, max_duration,
    max_per_client, max_result_bytes, max_bytes, poll_interval_ms (each > 0)."""
    if data is None:
        return _DEFAULTS
    if not isinstance(data, dict):
        check.fail("serve.tasks", "must be a mapping")
        return _DEFAULTS
    check.unknown_keys(data, {"mint_after", *(key for key, _, _ in _POSITIVE)}, "serve.tasks")
    mint = data.get("mint_after", _DEFAULTS.mint_after)
    if mint is False:
        mint = None
    elif isinstance(mint, bool) or not isinstance(mint, (int, float)) or not math.isfinite(mint) or mint < 0:
        check.fail("serve.tasks.mint_after", "must be seconds >= 0, or false (never mint a task)")
        mint = _DEFAULTS.mint_after
    values: dict = {"mint_after": None if mint is None else float(mint)}
    for key, kind, unit in _POSITIVE:
        value = check.typed(data, key, "serve.tasks", kind, getattr(_DEFAULTS, key))
        if value is None or not value > 0:  # NaN too
            check.fail(f"serve.tasks.{key}", f"must be > 0 {unit}, got {value!r}")
            value = getattr(_DEFAULTS, key)
        values[key] = value
    if values["max_result_bytes"] > values["max_bytes"]:
        check.fail("serve.tasks.max_result_bytes", "must not be larger than serve.tasks.max_bytes")
    return TasksConfig(**values)


def server_max_duration(item: dict, path: str, check: _Checker) -> float | None:
    """A server's `tasks: {max_duration: S}`: how long a task troupe mints around its call may run."""
    data = item.get("tasks")
    if data is None:
        return None
    if not isinstance(data, dict):
        check.fail(f"{path}.tasks", "must be a mapping: {max_duration: seconds}")
        return None
    check.unknown_keys(data, {"max_duration"}, f"{path}.tasks")
    value = check.typed(data, "max_duration", f"{path}.tasks", float)
    if value is not None and not value > 0:
        check.fail(f"{path}.tasks.max_duration", f"must be > 0 seconds, got {value!r}")
        return None
    return value
