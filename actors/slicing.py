"""Slices: long CPU work on a greenlet cut into slices, with the hub let run between them.

gevent never preempts: a loop over 10,000 tools (a catalogue build, a search index, a batch's
members) holds every other greenlet, every client's call included, until it ends. The work calls
its `Slices` once per item; once SLICE_SECONDS of work went by since the last pause, that call
sleeps for PAUSE_SECONDS, a timer: the loop polls I/O, fires due timers and runs every ready
greenlet, then the work goes on. Not `gevent.sleep(0)`: that only runs the greenlets already
queued, and a loop that pauses with it keeps timers and sockets waiting (measured: a 1 ms ticker
got no tick in 0.5 s beside such a loop; with a 0.1 ms sleep, one every ~20 ms). Nor
`gevent.idle()`: it waits for a loop with nothing else to do, which a greenlet spinning on
sleep(0) never leaves it. A call between pauses costs one clock read, so it may be made per item.

Only for work whose state is its own while it runs (locals of one greenlet, an actor's own
fields that nobody else touches): what it builds is handed on or published once whole, never
seen half-built.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, TypeVar

import gevent

# Work between two pauses. The hub's budget for one piece of work is ~50 ms (DESIGN.md); a slice
# of 10 ms leaves room for the item that overruns it and for a loaded machine.
SLICE_SECONDS = 0.010
PAUSE_SECONDS = 0.0001  # the shortest timer: it only has to let one turn of the loop happen
T = TypeVar("T")


class Slices:
    """Called once per item of some long work: yields to the hub when this slice is used up."""

    __slots__ = ("budget", "_since", "pauses")

    def __init__(self, budget: float = SLICE_SECONDS) -> None:
        self.budget = budget
        self._since = time.perf_counter()
        self.pauses = 0  # how often it yielded (for tests and benchmarks)

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self._since >= self.budget:
            gevent.sleep(PAUSE_SECONDS)
            self.pauses += 1
            self._since = time.perf_counter()


def paced(items: Iterable[T], between: Callable[[], None]) -> Iterator[T]:
    """`items`, with `between()` (a Slices) called before each."""
    for item in items:
        between()
        yield item


def never() -> None:
    """The pause of work too small to slice: does nothing."""
