"""The deferred span work of actors/ops/trace_later.py: jobs wait for a batch (or its wait) and an
idle hub, run in order, once each; a job that raises costs nothing else; a hub that is never idle
still runs them (inline, past the backlog); a job from another thread runs at once."""
from __future__ import annotations

import threading
import time

import gevent

from actors.ops import trace_later
from actors.ops.trace_later import Later


def _idle_until(condition, timeout: float = 5.0) -> bool:
    """Give the hub idle turns (gevent.sleep) until `condition()` holds, `timeout` at most."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        gevent.sleep(0.005)
    return condition()


def test_a_job_waits_for_its_batch_then_runs_at_an_idle_turn_in_order():
    later, done = Later(), []
    for n in range(3):
        later.add(done.append, n)
    assert done == [] and later.pending() == 3  # nothing runs on the call path
    assert _idle_until(lambda: done == [0, 1, 2])  # the batch's wait (MAX_WAIT_S) over, the hub idle
    assert later.pending() == 0


def test_a_full_batch_runs_at_the_next_idle_turn_without_waiting_out_its_timer(monkeypatch):
    monkeypatch.setattr(trace_later, "MAX_WAIT_S", 60.0)  # a timer this test would never see fire
    later, done = Later(), []
    for n in range(trace_later.BATCH - 1):
        later.add(done.append, n)
    gevent.sleep(0.05)
    assert done == []  # short of a batch: waiting for its timer
    later.add(done.append, trace_later.BATCH - 1)
    assert _idle_until(lambda: len(done) == trace_later.BATCH)
    assert done == list(range(trace_later.BATCH))


def test_a_failing_job_is_logged_and_the_next_still_runs():
    later, done = Later(), []

    def broken() -> None:
        raise RuntimeError("a span that cannot be made")

    later.add(broken)
    later.add(done.append, "after")
    later.run()
    assert done == ["after"]


def test_a_hub_that_is_never_idle_still_runs_the_jobs_past_the_backlog():
    later, done = Later(), []
    for n in range(trace_later.MAX_BACKLOG + 5):  # no idle turn in between
        later.add(done.append, n)
    assert len(done) >= trace_later.CHUNK and later.pending() <= trace_later.MAX_BACKLOG
    assert done == list(range(len(done)))  # in order, each once
    later.stop()
    assert done == list(range(trace_later.MAX_BACKLOG + 5))


def test_a_job_added_from_another_thread_runs_at_once():
    later, done = Later(), []
    later.add(done.append, "hub")  # binds the queue to this thread's hub
    other = threading.Thread(target=lambda: later.add(done.append, "thread"))
    other.start()
    other.join(5)
    assert done == ["thread"] and later.pending() == 1
    later.stop()
    assert done == ["thread", "hub"]
