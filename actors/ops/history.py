"""Each server's traffic over the last 15 minutes, for the dashboard's charts: calls/s, errors/s
and p50/p95 latency per sample, from the totals troupe already keeps (every Connection's
StatsSnapshot: calls, errors, latency buckets; its retired generations' too), and the last
calls that failed or were refused.

The History actor owns the samples. A clock greenlet of its own reads the totals every SAMPLE_S
(Runtime.server_totals: asks that may wait on the Connections, kept out of the actor's turn)
and tells them to it as Sampled; the actor turns each pair of successive totals into one point
per server. Nothing on a call's path waits on it: a failed call is told (CallFailed), never asked.
"""
from __future__ import annotations

import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import gevent
import pykka
from loguru import logger

from actors.ops import records
from actors.tells import tell
from actors.upstream.stats import LATENCY_BUCKETS, StatsSnapshot

SAMPLE_S = 10.0  # one point per server this often (TROUPE_HISTORY_SAMPLE_S: finer or coarser charts)
WINDOW_S = 900.0  # the charts' span: the last 15 minutes
RECENT_FAILURES = 50  # the last failed or refused calls shown


def history_sample_s() -> float:
    """SAMPLE_S, or TROUPE_HISTORY_SAMPLE_S when it is a number from 0.1 to 300."""
    try:
        value = float(os.environ.get("TROUPE_HISTORY_SAMPLE_S", ""))
    except ValueError:
        return SAMPLE_S
    return value if 0.1 <= value <= 300 else SAMPLE_S


@dataclass(frozen=True, slots=True)
class Sampled:
    """Told by the History's clock: every server's totals at `at` (a time.time())."""

    at: float
    totals: dict  # server name → StatsSnapshot


@dataclass(frozen=True, slots=True)
class CallFailed:
    """Told to the History when a client's call failed or was refused (an immutable summary, no
    argument or result value): shown among the last failures."""

    at: float
    client: str | None
    server: str
    name: str  # the tool, URI or prompt
    outcome: str  # error, timeout, rate_limited, cancelled, is_error
    code: int | None = None
    message: str = ""
    retry_after_s: float | None = None


@dataclass(frozen=True, slots=True)
class GetHistory:
    """Asked by the HTTP front (GET /api/history). Reply: the charts' data (History.report)."""

    reply: pykka.ThreadingFuture


FAILED = frozenset({records.IS_ERROR, records.ERROR, records.TIMEOUT, records.RATE_LIMITED})


def history_listener(history) -> Callable[[Any], None]:
    """An Observer listener telling `history` of each call that failed or was refused (a summary:
    who, which server and tool, the outcome and code; never arguments). Runs in the reporting
    Session's greenlet: a tell, nothing else."""
    def listen(record) -> None:
        if isinstance(record, records.CallRecord) and record.outcome in FAILED:
            tell(history, CallFailed(record.time, record.client, record.server or "troupe", record.target or
                                     record.method, record.outcome, record.code, records.code_text(record.code)))
    return listen


def quantile_ms(buckets: tuple, q: float) -> float | None:
    """The q-quantile of the calls counted in `buckets` (counts per LATENCY_BUCKETS bound, then
    one past the last), in ms: the bucket's upper bound, interpolated within it. None: no calls."""
    total = sum(buckets)
    if total <= 0:
        return None
    rank, seen = q * total, 0
    for i, count in enumerate(buckets):
        if count and seen + count >= rank:
            low = LATENCY_BUCKETS[i - 1] if i > 0 else 0.0
            high = LATENCY_BUCKETS[i] if i < len(LATENCY_BUCKETS) else LATENCY_BUCKETS[-1] * 2
            return round((low + (high - low) * (rank - seen) / count) * 1000, 2)
        seen += count
    return round(LATENCY_BUCKETS[-1] * 2000, 2)


def point(before: StatsSnapshot, after: StatsSnapshot, seconds: float) -> list | None:
    """[calls/s, errors/s, p50 ms, p95 ms] between two totals of one server; None when its counters
    went back (a server replaced under the same name): no point rather than a wrong one."""
    calls, errors = after.calls - before.calls, after.errors - before.errors
    delta = tuple(a - b for a, b in zip(after.bucket_counts, before.bucket_counts))
    if calls < 0 or errors < 0 or any(d < 0 for d in delta) or seconds <= 0:
        return None
    return [round(calls / seconds, 3), round(errors / seconds, 3), quantile_ms(delta, 0.5), quantile_ms(delta, 0.95)]


class History(pykka.ThreadingActor):
    """Owns every server's points over WINDOW_S and the last RECENT_FAILURES failed calls (see the
    module's docstring). Receives Sampled (its clock), CallFailed (from Sessions, no reply) and
    GetHistory (reply: `report()`)."""

    def __init__(self, read_totals: Callable[[], dict], sample_s: float = SAMPLE_S) -> None:
        super().__init__()
        self._read_totals, self.sample_s = read_totals, sample_s
        self._last: tuple[float, dict] | None = None  # the previous Sampled: its time and totals
        self._points: dict[str, deque] = {}  # server → deque of [at, calls/s, errors/s, p50, p95]
        self._failures: deque = deque(maxlen=RECENT_FAILURES)
        self._clock: gevent.Greenlet | None = None

    def on_start(self) -> None:
        me, read, every = self.actor_ref, self._read_totals, self.sample_s

        def clock() -> None:
            while True:
                try:
                    totals = read()
                except Exception as exc:  # a slow or stopping runtime: this sample is skipped
                    logger.debug("history: totals unreadable: {}", exc)
                else:
                    if not tell(me, Sampled(time.time(), totals)):
                        return
                gevent.sleep(every)
        self._clock = gevent.spawn(clock)

    def on_stop(self) -> None:
        if self._clock is not None:
            self._clock.kill(block=False)

    def on_receive(self, message: Any) -> None:
        match message:
            case Sampled():
                self._sampled(message)
            case CallFailed():
                self._failures.append(message)
            case GetHistory(reply=reply):
                reply.set(self.report())
            case _:
                logger.warning("history: unknown message {!r}", message)

    def _sampled(self, sample: Sampled) -> None:
        last, self._last = self._last, (sample.at, sample.totals)
        keep = max(2, int(WINDOW_S / self.sample_s) + 1)
        if last is not None:
            seconds = sample.at - last[0]
            for name, after in sample.totals.items():
                before = last[1].get(name)
                found = point(before, after, seconds) if isinstance(before, StatsSnapshot) and \
                    isinstance(after, StatsSnapshot) else None
                if found is not None:
                    self._points.setdefault(name, deque(maxlen=keep)).append([round(sample.at, 1), *found])
        oldest = sample.at - WINDOW_S
        for name in [n for n, points in self._points.items() if n not in sample.totals and
                     (not points or points[-1][0] < oldest)]:
            del self._points[name]  # a server gone for the whole window

    def report(self) -> dict:
        """The charts' data: each server's points, oldest first ([at, calls/s, errors/s, p50 ms,
        p95 ms]), and the last failed or refused calls, newest first."""
        return {"sample_s": self.sample_s, "window_s": WINDOW_S,
                "servers": {name: list(points) for name, points in sorted(self._points.items())},
                "failures": [{"at": f.at, "client": f.client, "server": f.server, "name": f.name,
                              "outcome": f.outcome, "code": f.code, "message": f.message,
                              "retry_after_s": f.retry_after_s} for f in reversed(self._failures)]}
