"""The calls a Connection holds back beyond max_in_flight: a FIFO line, each call still bounded
by its own timeout.

A plain object used only from its Connection's greenlet; a waiting call's timer only calls
`on_deadline(ticket)`, which the Connection turns into a tell to itself.
"""
from __future__ import annotations

import time
from typing import Callable

import gevent

from actors.messages import Forward
from actors.upstream.requests import matches
from actors.upstream.stats import ServerStats


class WaitingLine:
    """Owns the calls waiting for a free slot, oldest first, each with its timer; keeps
    `stats.queued` equal to their number."""

    def __init__(self, stats: ServerStats, on_deadline: Callable[[int], None]) -> None:
        self.stats = stats
        self._on_deadline = on_deadline  # runs in the timer's greenlet: must only tell the owner
        self._next_ticket = 0
        # ticket → (call, timer, timeout, since), oldest first
        self._queued: dict[int, tuple[Forward, gevent.Greenlet, float, float]] = {}

    def __len__(self) -> int:
        return len(self._queued)

    def add(self, fwd: Forward, timeout: float) -> int:
        """Queue a call at the back of the line; its ticket."""
        self._next_ticket += 1
        ticket = self._next_ticket
        timer = gevent.spawn_later(timeout, self._on_deadline, ticket)
        self._queued[ticket] = (fwd, timer, timeout, time.monotonic())
        self.stats.queued = len(self._queued)
        return ticket

    def expire(self, ticket: int) -> tuple[Forward, float] | None:
        """The ticket's timer fired: (call, its timeout) to answer, or None if it left the line meanwhile."""
        entry = self._queued.pop(ticket, None)
        if entry is None:
            return None
        self.stats.queued = len(self._queued)
        return entry[0], entry[2]

    def pop_oldest(self) -> tuple[Forward, float, float]:
        """The longest-waiting call leaves the line: (call, its timeout, the time it has left)."""
        ticket = next(iter(self._queued))
        fwd, timer, timeout, since = self._queued.pop(ticket)
        timer.kill(block=False)
        self.stats.queued = len(self._queued)
        # the wait counts against the call's timeout: queued or sent, it is answered in time
        return fwd, timeout, timeout - (time.monotonic() - since)

    def drop_matching(self, origin, origin_request) -> None:
        """A cancelled call leaves the line unanswered (never sent: nothing to cancel upstream)."""
        for ticket in [t for t, (fwd, *_) in self._queued.items() if matches(fwd, origin, origin_request)]:
            self._queued.pop(ticket)[1].kill(block=False)
        self.stats.queued = len(self._queued)

    def clear(self) -> list[Forward]:
        """Empty the line, timers stopped; the calls, oldest first, for the owner to answer."""
        queued, self._queued = self._queued, {}
        self.stats.queued = 0
        for _, timer, *_ in queued.values():
            timer.kill(block=False)
        return [fwd for fwd, *_ in queued.values()]
