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
    """Paths whose stamp differs, including paths that are no longer watched (a glob lost a match)."""
    return tuple(p for p in {**old, **new} if old.get(p) != new.get(p))


def watch(paths: Iterable[str] | Callable[[], Iterable[str]], on_change: Callable[[tuple], None],
          interval: float) -> gevent.Greenlet:
    """Spawn the polling loop; on_change(paths) must not block (typically an ActorRef.tell).

    `paths` may be a callable, asked again at every poll: globbed locations (VS Code profiles,
    Continue's block files, Gemini extensions) gain and lose files while troupe runs.
    The loop ends when on_change raises (its actor is gone) or the greenlet is killed.
    """
    fixed = None if callable(paths) else tuple(dict.fromkeys(str(p) for p in paths))

    def current() -> tuple:
        return fixed if fixed is not None else tuple(dict.fromkeys(str(p) for p in paths()))  # type: ignore[operator]

    def loop() -> None:
        before = snapshot(current())
        while True:
            gevent.sleep(interval)
            try:
                after = snapshot(current())
                diff = changed(before, after)
                before = after
                if diff:
                    on_change(diff)
            except Exception as exc:  # the owner is gone: stop polling quietly
                logger.debug("discovery watcher stopped: {}", exc)
                return

    return gevent.spawn(loop)
