"""Rate limits (actors/ratelimit): the token bucket's arithmetic on a test clock, which buckets a
call is checked against (its profile's or the anonymous one, and its server's), all or none of
them taken, the refusal's error and Retry-After, a reload keeping tokens, the report and the
audit hook."""
from __future__ import annotations

from types import MappingProxyType

import pytest

from actors.protocol import jsonrpc
from actors.ratelimit import report
from actors.ratelimit.buckets import TokenBucket
from actors.ratelimit.limiter import RateLimiter
from actors.ratelimit.refusal import TOO_MANY, is_refusal, retry_after_header
from actors.settings.rate_section import Rate, RateConfig


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _rates(profiles=None, servers=None, anonymous=None) -> RateConfig:
    return RateConfig(MappingProxyType(profiles or {}), MappingProxyType(servers or {}), anonymous)


def test_a_bucket_starts_full_refills_evenly_and_never_past_its_burst():
    bucket = TokenBucket(Rate(60.0, 3), 0.0)  # one token a second
    for _ in range(3):
        assert bucket.refill(0.0) >= 1 and bucket.wait() == 0
        bucket.take()
    assert bucket.refill(0.0) == 0 and bucket.wait() == pytest.approx(1.0)
    assert bucket.refill(0.25) == pytest.approx(0.25) and bucket.wait() == pytest.approx(0.75)
    assert bucket.refill(100.0) == 3.0  # idle for long: a burst again, no more
    assert bucket.refill(50.0) == 3.0  # a clock that went back adds nothing and breaks nothing
    bucket.limit(Rate(60.0, 1), 100.0)
    assert bucket.tokens == 1.0  # a smaller burst caps what it holds
    bucket.take()
    bucket.limit(Rate(6000.0, 10), 100.5)  # the half second before the change came at the old rate
    assert bucket.tokens == pytest.approx(0.5) and bucket.refill(100.505) == pytest.approx(1.0)


def test_a_burst_past_the_profile_bucket_is_refused_with_when_to_retry():
    clock = Clock()
    limiter = RateLimiter(_rates(profiles={"bots": Rate(120.0, 2)}), clock=clock)
    assert limiter.admit("bot1", "bots", "echo", "tools/call") is None
    assert limiter.admit("bot2", "bots", "echo", "resources/read") is None  # the profile's clients share it
    refusal = limiter.admit("bot1", "bots", "echo", "prompts/get")
    assert refusal is not None
    assert (refusal.scope, refusal.name, refusal.retry_after_s) == ("profile", "bots", 0.5)
    assert (refusal.client, refusal.profile, refusal.server, refusal.method) == ("bot1", "bots", "echo",
                                                                                  "prompts/get")
    error = refusal.error(7)
    assert error["id"] == 7 and error["error"]["code"] == jsonrpc.RATE_LIMITED == -32003
    assert error["error"]["data"] == {"retry_after_s": 0.5, "limit": {"per_minute": 120, "burst": 2},
                                      "scope": "profile", "name": "bots"}
    assert error["error"]["message"] == "rate limit reached for profile 'bots' (120/min, burst 2): retry in 0.5s"
    assert retry_after_header(error) == ("Retry-After", "1") and TOO_MANY.startswith("429")
    assert is_refusal(error)
    assert not is_refusal(jsonrpc.error(7, jsonrpc.RATE_LIMITED, "an upstream's own -32003"))
    clock.now += 0.5
    assert limiter.admit("bot1", "bots", "echo", "tools/call") is None  # the token came back when it said


def test_other_profiles_anonymous_clients_and_unlimited_methods_are_not_touched():
    limiter = RateLimiter(_rates(profiles={"bots": Rate(60.0, 1)}, anonymous=Rate(60.0, 1)), clock=Clock())
    assert limiter.admit("bot", "bots", "echo", "tools/call") is None
    assert limiter.admit("bot", "bots", "echo", "tools/call") is not None
    for _ in range(5):
        assert limiter.admit("alice", "readers", "echo", "tools/call") is None  # a profile without a limit
        assert limiter.admit("carol", None, "echo", "tools/call") is None  # a named client without a profile
        assert limiter.admit("bot", "bots", "echo", "tools/list") is None  # listings never count
        assert limiter.admit("bot", "bots", "echo", "resources/subscribe") is None
    assert limiter.admit(None, None, "echo", "tools/call") is None  # serve.rate: its own bucket
    refusal = limiter.admit(None, "bots", "echo", "completion/complete")
    assert refusal is not None and (refusal.scope, refusal.name) == ("anonymous", "anonymous")


def test_a_call_takes_a_token_from_its_client_and_its_server_or_from_neither():
    clock = Clock()
    limiter = RateLimiter(_rates(profiles={"a": Rate(60.0, 5), "b": Rate(60.0, 5)},
                                 servers={"paid": Rate(60.0, 2)}), clock=clock)
    assert limiter.admit("x", "a", "paid", "tools/call") is None
    assert limiter.admit("y", "b", "paid", "tools/call") is None
    refusal = limiter.admit("x", "a", "paid", "tools/call")  # the server's bucket is empty, a's is not
    assert refusal is not None and (refusal.scope, refusal.name) == ("server", "paid")
    assert limiter.admit("x", "a", "free", "tools/call") is None  # another server: a's bucket only
    buckets = {(b["scope"], b["name"]): b for b in limiter.report()["buckets"]}
    # the refused call took nothing from a's bucket: 5 - 2 calls that went
    assert buckets[("profile", "a")]["tokens"] == 3 and buckets[("profile", "a")]["allowed"] == 2
    assert buckets[("server", "paid")] == {"scope": "server", "name": "paid", "limit": {"per_minute": 60, "burst": 2},
                                           "tokens": 0, "allowed": 2, "refused": 1, "fail_open": 0}
    assert buckets[("profile", "b")]["refused"] == 0


def test_when_both_buckets_are_empty_the_refusal_names_the_one_that_refills_last():
    limiter = RateLimiter(_rates(profiles={"a": Rate(60.0, 1)}, servers={"s": Rate(6.0, 1)}), clock=Clock())
    assert limiter.admit("x", "a", "s", "tools/call") is None
    refusal = limiter.admit("x", "a", "s", "tools/call")
    assert refusal is not None and (refusal.scope, refusal.retry_after_s) == ("server", 10.0)


def test_a_reload_keeps_the_tokens_takes_the_new_limit_and_drops_removed_buckets():
    clock = Clock()
    limiter = RateLimiter(_rates(profiles={"a": Rate(60.0, 3)}, servers={"s": Rate(60.0, 3)}), clock=clock)
    for _ in range(3):
        assert limiter.admit("x", "a", "s", "tools/call") is None
    assert limiter.admit("x", "a", "s", "tools/call") is not None
    limiter.reconfigure(_rates(profiles={"a": Rate(600.0, 10)}))  # the server's limit is gone
    assert limiter.admit("x", "a", "s", "tools/call") is not None  # still empty: a reload gives no free burst
    clock.now += 0.1  # 600/min: a token each 0.1 s
    assert limiter.admit("x", "a", "s", "tools/call") is None
    assert [(b["scope"], b["name"], b["limit"]) for b in limiter.report()["buckets"]] == \
        [("profile", "a", {"per_minute": 600, "burst": 10})]
    limiter.reconfigure(_rates())
    assert limiter.report()["buckets"] == [] and limiter.admit("x", "a", "s", "tools/call") is None


def test_every_refusal_reaches_the_watchers_and_a_broken_watcher_changes_nothing():
    limiter = RateLimiter(_rates(servers={"s": Rate(60.0, 1)}), clock=Clock())
    seen = []

    def broken(refusal) -> None:
        raise RuntimeError("an audit bug")
    limiter.on_refused(broken)
    limiter.on_refused(seen.append)
    assert limiter.admit("x", "p", "s", "tools/call") is None
    refusal = limiter.admit("x", "p", "s", "tools/call")
    assert refusal is not None and seen == [refusal]


def test_the_status_line_and_an_unused_limit():
    limiter = RateLimiter(_rates(profiles={"bots": Rate(600.0, 50)}), clock=Clock())
    rates = limiter.report()
    assert rates == {"shared": False, "buckets": [{"scope": "profile", "name": "bots",
                                                   "limit": {"per_minute": 600, "burst": 50}, "tokens": 50.0,
                                                   "allowed": 0, "refused": 0, "fail_open": 0}]}
    assert report.line(rates) == "rates: profile bots 600/min burst 50 (50 left, 0 refused)"
    assert report.line({"shared": False, "buckets": []}) == "" and report.line(None) == ""


def test_retry_after_is_whole_seconds_rounded_up_and_at_least_one():
    def answer(wait):
        return {"error": {"code": jsonrpc.RATE_LIMITED, "data": {"retry_after_s": wait}}}
    assert retry_after_header(answer(0.001)) == ("Retry-After", "1")
    assert retry_after_header(answer(2.5)) == ("Retry-After", "3")
    assert retry_after_header({"error": {}}) == ("Retry-After", "1")
