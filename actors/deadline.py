"""Deadline: a one-shot timer on gevent's hub for the deadlines of the hot path."""
from __future__ import annotations

from typing import Any, Callable

import gevent


class Deadline:
    """Runs `callback(*args)` in a new greenlet `seconds` from now, unless killed first.

    Every forwarded call has two deadlines (the Session's and the Connection's) and nearly all
    are cancelled by the answer. gevent.spawn_later makes a greenlet for each (~5 µs to make and
    kill); this starts a bare hub timer (~0.5 µs) and spawns a greenlet only when it fires, so
    the callback may block or tell like any greenlet, never inside the hub.
    """

    __slots__ = ("_timer", "dead")

    def __init__(self, seconds: float, callback: Callable[..., Any], *args: Any) -> None:
        self.dead = False  # fired or killed: it will not fire (again)
        self._timer = gevent.get_hub().loop.timer(max(0.0, seconds))
        self._timer.start(self._fire, callback, args)

    def _fire(self, callback: Callable[..., Any], args: tuple) -> None:
        self.kill()
        gevent.spawn(callback, *args)

    def kill(self, block: bool = False) -> None:
        """Cancel (the same call as a greenlet's, so either can be held); harmless once fired."""
        self.dead = True
        self._timer.close()
