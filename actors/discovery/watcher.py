"""File watcher: polls mtimes and sizes of config files (and PATH dirs) in a greenlet."""
from __future__ import annotations

import os
from typing import Callable, Iterable

import gevent
from loguru import logger

Stamp = tuple | None


def stamp(path: str) -> Stamp:
    """What changes when a file is edited, replaced, created or deleted."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def snapshot(paths: Iterable[str]) -> dict[str, Stamp]:
    return {p: stamp(p) for p in paths}


def changed(old: dict[str, Stamp], new: dict[str, Stamp]) -> tuple[str, ...]:
    return tuple(p for p in new if old.get(p) != new[p])


def watch(paths: Iterable[str], on_change: Callable[[tuple], None], interval: float) -> gevent.Greenlet:
    """Spawn the polling loop; on_change(paths) must not block (typically an ActorRef.tell).

    The loop ends when on_change raises (its actor is gone) or the greenlet is killed.
    """
    paths = tuple(dict.fromkeys(str(p) for p in paths))

    def loop() -> None:
        before = snapshot(paths)
        while True:
            gevent.sleep(interval)
            try:
                after = snapshot(paths)
                diff = changed(before, after)
                before = after
                if diff:
                    on_change(diff)
            except Exception as exc:  # the owner is gone: stop polling quietly
                logger.debug("discovery watcher stopped: {}", exc)
                return

    return gevent.spawn(loop)
