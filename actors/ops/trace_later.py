"""Span work that can wait until the call it measures has been answered: what a span's attributes
say, its end's marks, handing it to the export. The call path does only what the next hop needs
now (the span's ids, its times, the context that goes upstream) and queues the rest here; the
hub runs the queue when it has nothing else to do (a libev idle watcher), so filling and ending
spans costs a call none of its latency (scripts/_bench_ops.py, section 8 of scripts/bench.py).
Jobs are gathered, BATCH of them or MAX_WAIT_S' worth, before the hub runs them: one idle turn
for a hundred calls' spans, instead of one after each call (each turn is a wake of the loop, and
each call's spans done alone run cold: the batch costs about half the CPU).

Bounded: a hub that is never idle (a saturated troupe) would let the queue grow, so past
MAX_BACKLOG jobs the job adding one runs a chunk first, which is what tracing cost every call
before (the work is the same; only when it runs changes). A job runs in the hub's thread, in the
order queued, each at most once; one that raises is logged and costs nothing else.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

import gevent
from gevent import monkey
from loguru import logger

_thread_id = monkey.get_original("_thread", "get_ident")  # the OS thread's, even once patched

BATCH = 128  # jobs gathered before the hub runs them, at its next idle turn (two per traced call)
MAX_WAIT_S = 0.05  # a job waits this long at most for its batch (a quiet troupe's spans still go)
MAX_BACKLOG = 512  # queued jobs; past it (a hub never idle), jobs run inline
CHUNK = 128  # jobs run per idle turn: ~10 µs each, well inside DESIGN.md's 50 ms


class Later:
    """The queue of deferred span jobs of one Tracing. Shared by every Session, all greenlets of
    one hub: the deque's appends and pops are atomic, and the idle watcher is started and run in
    that hub's thread only (a job added from any other thread runs at once instead)."""

    __slots__ = ("_jobs", "_thread", "_idle", "_timer", "_armed", "_timed")

    def __init__(self) -> None:
        self._jobs: collections.deque = collections.deque()
        self._thread: int | None = None  # the thread whose hub runs the jobs: the first to add one
        self._idle: Any = None  # that hub loop's idle watcher: runs the jobs
        self._timer: Any = None  # its timer: arms the idle watcher MAX_WAIT_S after a batch's first job
        self._armed = False  # the idle watcher is started (plain flags: cheaper to read than `active`)
        self._timed = False  # the timer is started

    def add(self, job: Callable, *args: Any) -> None:
        """Run `job(*args)` once the hub is idle (at once off the hub's thread, or past the backlog)."""
        if self._thread != _thread_id():
            if self._thread is not None:
                _run(job, args)
                return
            loop = gevent.get_hub().loop
            self._thread, self._idle, self._timer = _thread_id(), loop.idle(), loop.timer(MAX_WAIT_S)
        jobs = self._jobs
        if len(jobs) >= MAX_BACKLOG:
            self.run(CHUNK)
        jobs.append((job, args))
        if self._armed:
            return
        if len(jobs) >= BATCH:
            self._arm()
        elif not self._timed:
            self._timed = True
            self._timer.start(self._arm)

    def _arm(self) -> None:
        """Run the batch at the hub's next idle turn (a full batch, or its first job's wait over)."""
        if not self._armed:
            self._armed = True
            self._idle.start(self._turn)

    def _turn(self) -> None:
        """The idle watcher's callback: one chunk, then stop watching when nothing is left."""
        self.run(CHUNK)
        if not self._jobs:
            self._disarm()

    def _disarm(self) -> None:
        self._armed = self._timed = False
        self._idle.stop()
        self._timer.stop()

    def run(self, limit: int | None = None) -> None:
        """Run queued jobs now, `limit` of them at most (None: all, as a flush or a test does)."""
        jobs = self._jobs
        done = 0
        while jobs and (limit is None or done < limit):
            try:
                job, args = jobs.popleft()
            except IndexError:
                return
            _run(job, args)
            done += 1

    def pending(self) -> int:
        return len(self._jobs)

    def stop(self) -> None:
        """Run what is queued and stop watching (troupe's stop, before the last export)."""
        self.run()
        if self._idle is not None:
            self._disarm()


def _run(job: Callable, args: tuple) -> None:
    try:
        job(*args)
    except Exception:  # a span that cannot be filled or ended costs its span, never the hub
        logger.exception("tracing: deferred span work failed")
