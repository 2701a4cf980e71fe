"""The dashboard's traffic history (actors/ops/history.py) on its own: quantiles from latency
buckets, a point between two totals, counters that go back give no point, and the actor's
window, failures and report."""
from __future__ import annotations

import pykka
import pytest

from actors.ops import history
from actors.ops.history import CallFailed, GetHistory, History, Sampled, point, quantile_ms
from actors.upstream.stats import LATENCY_BUCKETS, StatsSnapshot

EMPTY = (0,) * (len(LATENCY_BUCKETS) + 1)


def _buckets(**at_ms) -> tuple:
    """Counts per bucket, by the bucket's bound in ms (`b10=3`: 3 calls in the ≤10 ms bucket)."""
    counts = list(EMPTY)
    for key, n in at_ms.items():
        counts[LATENCY_BUCKETS.index(int(key[1:]) / 1000)] = n
    return tuple(counts)


def _snap(calls: int, errors: int, buckets: tuple) -> StatsSnapshot:
    return StatsSnapshot(calls=calls, errors=errors, bucket_counts=buckets)


def test_quantiles_come_from_the_buckets_interpolated_within_one():
    assert quantile_ms(EMPTY, 0.5) is None
    ten = _buckets(b10=10)  # all ten calls in (5 ms, 10 ms]
    assert quantile_ms(ten, 0.5) == 7.5 and quantile_ms(ten, 1.0) == 10.0
    skewed = _buckets(b1=90, b1000=10)
    assert quantile_ms(skewed, 0.5) <= 1.0 and 500.0 < quantile_ms(skewed, 0.95) <= 1000.0


def test_a_point_is_rates_and_latency_between_two_totals_and_none_when_counters_went_back():
    before = _snap(100, 1, _buckets(b10=100))
    after = _snap(150, 6, _buckets(b10=140, b100=10))
    calls_s, errors_s, p50, p95 = point(before, after, 10.0)
    assert (calls_s, errors_s) == (5.0, 0.5)
    assert 5.0 < p50 <= 10.0 and 50.0 < p95 <= 100.0
    assert point(after, before, 10.0) is None  # a server replaced under the same name
    assert point(before, after, 0.0) is None
    idle = point(after, after, 10.0)
    assert idle == [0.0, 0.0, None, None]


@pytest.fixture
def actor():
    ref = History.start(lambda: {}, sample_s=300)  # its clock's samples are empty: the test tells its own
    yield ref
    pykka.ActorRegistry.stop_all()


def _report(ref) -> dict:
    future = pykka.ThreadingFuture()
    ref.tell(GetHistory(future))
    return future.get(timeout=5)


def test_the_actor_keeps_one_point_per_sample_within_the_window_and_the_last_failures(actor, monkeypatch):
    monkeypatch.setattr(history, "WINDOW_S", 30.0)  # 30 s at one sample per 300 s: at least two points kept
    t0 = 1_000_000.0
    for i in range(6):
        actor.tell(Sampled(t0 + 10 * i, {"echo": _snap(10 * i, 0, _buckets(b10=10 * i))}))
    report = _report(actor)
    points = report["servers"]["echo"]
    assert len(points) == 2 and points[-1][0] == t0 + 50 and points[-1][1] == 1.0  # the window's newest only
    for n in range(history.RECENT_FAILURES + 5):
        actor.tell(CallFailed(t0 + n, "alice", "echo", "echo", "rate_limited", -32003, "slow down", 1.5))
    failures = _report(actor)["failures"]
    assert len(failures) == history.RECENT_FAILURES and failures[0]["at"] == t0 + history.RECENT_FAILURES + 4
    assert failures[0] == {"at": failures[0]["at"], "client": "alice", "server": "echo", "name": "echo",
                           "outcome": "rate_limited", "code": -32003, "message": "slow down", "retry_after_s": 1.5}


def test_a_server_gone_for_the_whole_window_leaves_the_report(actor, monkeypatch):
    monkeypatch.setattr(history, "WINDOW_S", 20.0)
    actor.tell(Sampled(0.0, {"gone": _snap(0, 0, EMPTY)}))
    actor.tell(Sampled(10.0, {"gone": _snap(5, 0, _buckets(b10=5))}))
    assert "gone" in _report(actor)["servers"]
    actor.tell(Sampled(40.0, {}))
    assert "gone" not in _report(actor)["servers"]


def test_the_sample_interval_can_be_set_within_bounds(monkeypatch):
    for raw, want in (("0.5", 0.5), ("oops", history.SAMPLE_S), ("0", history.SAMPLE_S), ("1000", history.SAMPLE_S)):
        monkeypatch.setenv("TROUPE_HISTORY_SAMPLE_S", raw)
        assert history.history_sample_s() == want


def test_the_listener_tells_the_history_of_failures_only_and_never_arguments(actor):
    from actors.ops.records import ActRecord, CallRecord
    listen = history.history_listener(actor)

    def record(outcome: str, code=None) -> CallRecord:
        return CallRecord(5.0, None, "alice", "all", "s1", "modern", "tools/call", "echo", "fail", "ab" * 32,
                          outcome, code, 1.0, None)
    listen(record("ok"))
    listen(record("cache_hit"))
    listen(record("cancelled"))
    listen(ActRecord(5.0, None, "approve", "echo", "root", "cli"))
    listen(record("is_error"))
    listen(record("rate_limited", -32003))
    failures = _report(actor)["failures"]
    assert [(f["outcome"], f["code"], f["message"]) for f in failures] == [
        ("rate_limited", -32003, "rate limited"), ("is_error", None, "")]
    assert all("ab" * 32 not in str(f) for f in failures)
