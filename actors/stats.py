"""Per-server call statistics, shared read-only with status and metrics (no actor hop)."""
from __future__ import annotations

import bisect
from collections import deque

# Prometheus-style latency buckets, seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
RECENT = 512  # latencies kept for p50/p99 in the status report


class ServerStats:
    """Written only by the server's Connection actor; read by status and metrics.

    Plain counters: under gevent nothing preempts between two attribute writes,
    so a reader always sees a consistent-enough picture without locks.
    """

    __slots__ = ("in_flight", "calls", "errors", "timeouts", "bucket_counts", "latency_sum", "recent")

    def __init__(self) -> None:
        self.in_flight = 0
        self.calls = 0
        self.errors = 0
        self.timeouts = 0
        self.bucket_counts = [0] * (len(LATENCY_BUCKETS) + 1)
        self.latency_sum = 0.0
        self.recent: deque[float] = deque(maxlen=RECENT)

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

    def summary(self) -> dict:
        p50, p99 = self.percentile(0.5), self.percentile(0.99)
        return {"calls": self.calls, "errors": self.errors, "timeouts": self.timeouts,
                "latency_ms": {"p50": _ms(p50), "p99": _ms(p99)}}


def _ms(v: float | None) -> float | None:
    return None if v is None else round(v * 1000, 3)
