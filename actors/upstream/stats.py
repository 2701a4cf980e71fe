"""Per-connection call statistics: counted by one Connection generation, shown as snapshots."""
from __future__ import annotations

import bisect
import time
from collections import deque
from dataclasses import dataclass

# Prometheus-style latency buckets, seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RECENT = 512  # latencies kept for p50/p99 in the status report
# What a server sends that troupe drops (non-JSON lines, replies with unusable ids) is
# logged at this rate per server, in bursts of at most LOG_BURST lines; the rest is counted.
LOG_RATE_PER_SEC = 2.0
LOG_BURST = 5


@dataclass(frozen=True, slots=True)
class StatsSnapshot:
    """A connection's counters at one moment (reply to GetStats; sent in ConnectionRetired).

    Totals add up across a server's generations (`plus`); in_flight, queued and the
    percentiles are the live generation's own.
    """

    in_flight: int = 0
    queued: int = 0
    calls: int = 0
    errors: int = 0
    timeouts: int = 0
    garbage_lines: int = 0
    bad_ids: int = 0
    bucket_counts: tuple = (0,) * (len(LATENCY_BUCKETS) + 1)
    latency_sum: float = 0.0
    p50: float | None = None
    p99: float | None = None
    relists: int = 0  # lists read again after the first listing (a paginated one counts once)
    notes: tuple = ()  # what the live generation refused of the server's lists (tool_limits), as sentences

    def plus(self, live: "StatsSnapshot") -> "StatsSnapshot":
        """These retired totals with a live generation's figures on top."""
        return StatsSnapshot(live.in_flight, live.queued, self.calls + live.calls, self.errors + live.errors,
                             self.timeouts + live.timeouts, self.garbage_lines + live.garbage_lines,
                             self.bad_ids + live.bad_ids,
                             tuple(a + b for a, b in zip(self.bucket_counts, live.bucket_counts)),
                             self.latency_sum + live.latency_sum, live.p50, live.p99,
                             self.relists + live.relists, live.notes)

    def to_json(self) -> dict:
        """The status report's figures for one server."""
        return {"in_flight": self.in_flight, "queued": self.queued, "calls": self.calls, "errors": self.errors,
                "timeouts": self.timeouts, "garbage_lines": self.garbage_lines, "bad_ids": self.bad_ids,
                "latency_ms": {"p50": _ms(self.p50), "p99": _ms(self.p99)},
                "latency_buckets": list(self.bucket_counts), "latency_sum_s": self.latency_sum,
                "relists": self.relists, "notes": list(self.notes)}


class ServerStats:
    """One Connection generation's counters, written and read only by that Connection;
    others get a StatsSnapshot by message.

    Plain counters: under gevent nothing preempts between two attribute writes,
    so a reader always sees a consistent-enough picture without locks.
    """

    __slots__ = ("in_flight", "queued", "calls", "errors", "timeouts", "garbage_lines", "bad_ids", "bucket_counts",
                 "latency_sum", "recent", "relists", "notes")

    def __init__(self) -> None:
        self.in_flight = 0
        self.queued = 0  # calls waiting for a free slot (beyond max_in_flight)
        self.calls = 0
        self.errors = 0
        self.timeouts = 0
        self.garbage_lines = 0  # stdout lines that were not JSON-RPC messages
        self.bad_ids = 0  # replies or requests whose id was neither a string nor an integer
        self.bucket_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.relists = 0  # counted by UpstreamLists
        self.notes: tuple = ()  # what the last listing had refused (actors/upstream/tool_limits.py)

    def record(self, seconds: float, ok: bool) -> None:
        self.calls += 1
        if not ok:
            self.errors += 1
        self.latency_sum += seconds
        self.bucket_counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.recent.append(seconds)

    def percentile(self, q: float) -> float | None:
        if not self.recent:
            return None
        ordered = sorted(self.recent)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    def snapshot(self) -> StatsSnapshot:
        return StatsSnapshot(self.in_flight, self.queued, self.calls, self.errors, self.timeouts,
                             self.garbage_lines, self.bad_ids, tuple(self.bucket_counts), self.latency_sum,
                             self.percentile(0.5), self.percentile(0.99), self.relists, self.notes)


class LogBudget:
    """A token bucket for log lines about one server's misbehaviour.

    `take(n)` is asked before logging about `n` dropped things: it returns how many earlier
    ones went unlogged (so the line can say so), or None when this one must not be logged.
    """

    __slots__ = ("rate", "burst", "tokens", "stamp", "suppressed")

    def __init__(self, rate: float = LOG_RATE_PER_SEC, burst: int = LOG_BURST) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.stamp, self.suppressed = float(burst), time.monotonic(), 0

    def take(self, n: int = 1) -> int | None:
        now = time.monotonic()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1.0:
            self.suppressed += n
            return None
        self.tokens -= 1.0
        suppressed, self.suppressed = self.suppressed, 0
        return suppressed


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 3)
