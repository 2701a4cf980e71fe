"""loguru_without_asyncio: loguru as troupe uses it, without asyncio loaded for it.

loguru imports asyncio at its own import, for one thing: coroutine sinks (`logger.add(async_fn)`)
ask for the running event loop. troupe runs on gevent and adds no such sink, yet asyncio would
cost every start ~20 ms and, through the ssl it imports, OpenSSL: ~6 MiB of RSS before any server
is up. `install`, called before loguru is first imported, puts in place of loguru's
`_asyncio_loop` a module with the same two functions that import asyncio only when called, so a
coroutine sink still works as loguru documents.
"""
from __future__ import annotations

import sys
from types import ModuleType

MODULE = "loguru._asyncio_loop"


def get_task_loop(task):
    """The loop a task runs on (loguru's own answer on Python >= 3.7)."""
    return task.get_loop()


def get_running_loop():
    """asyncio.get_running_loop(), asyncio imported on this first call."""
    import asyncio
    return asyncio.get_running_loop()


def install() -> None:
    """Stand in for loguru's `_asyncio_loop`, unless loguru is loaded already (then it has its own)."""
    if "loguru" in sys.modules or MODULE in sys.modules:
        return
    stand_in = ModuleType(MODULE, __doc__)
    stand_in.get_task_loop = get_task_loop  # type: ignore[attr-defined]
    stand_in.get_running_loop = get_running_loop  # type: ignore[attr-defined]
    sys.modules[MODULE] = stand_in
