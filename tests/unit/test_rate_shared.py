"""The cluster's shared buckets on a real Redis: the Lua script takes from all of a call's buckets
or none, two limiters (two instances) draw on one bucket, and a Redis that is gone, or too slow
to answer within REDIS_TIMEOUT_S, lets calls through at once (fail open, counted) and is asked
again after a quiet second."""
from __future__ import annotations

import threading
import time
from types import MappingProxyType

import pytest

from actors.ratelimit.limiter import RateLimiter
from actors.ratelimit.shared import QUIET_S, REDIS_TIMEOUT_S, SharedBuckets
from actors.settings.rate_section import Rate, RateConfig
from tests.support import wait_until
from tests.support.redis import RedisServer


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


def _limiter(redis, profiles=None, servers=None, prefix="t") -> RateLimiter:
    rates = RateConfig(MappingProxyType(profiles or {}), MappingProxyType(servers or {}), None)
    return RateLimiter(rates, SharedBuckets(redis.url, prefix))


def test_the_script_takes_from_every_bucket_or_from_none(redis):
    shared = SharedBuckets(redis.url, "t")
    try:
        both = [("profile", "a", Rate(60.0, 3)), ("server", "s", Rate(60.0, 1))]
        taken, figures = shared.take(both)
        assert taken and [round(t, 3) for t, _ in figures] == [2.0, 0.0] and [w for _, w in figures] == [0.0, 0.0]
        taken, figures = shared.take(both)
        assert not taken
        assert round(figures[0][0], 1) == 2.0  # the profile's token was not taken for a refused call
        assert 0.9 < figures[1][1] <= 1.0  # the server's comes back within a second (60/min)
        assert shared.link.client.pttl("t:rate:server:s") > 0  # an idle bucket's key goes by itself
    finally:
        shared.close()


def test_two_instances_share_one_bucket(redis):
    a, b = _limiter(redis, profiles={"bots": Rate(6.0, 4)}), _limiter(redis, profiles={"bots": Rate(6.0, 4)})
    try:
        outcomes = [limiter.admit("bot", "bots", "echo", "tools/call") for limiter in (a, b, a, b, a, b)]
        assert [o is None for o in outcomes] == [True, True, True, True, False, False]
        refusal = outcomes[4]
        assert refusal is not None and refusal.scope == "profile" and 9.0 < refusal.retry_after_s <= 10.0
        report = a.report()
        assert report["shared"] and report["redis"]["up"]
        assert report["buckets"][0]["allowed"] == 2 and report["buckets"][0]["refused"] == 1
        assert report["buckets"][0]["tokens"] == 0
    finally:
        a.close()
        b.close()


def test_a_redis_that_is_gone_lets_calls_through_counted_and_is_tried_again(redis):
    limiter = _limiter(redis, servers={"s": Rate(60.0, 1)})
    try:
        assert limiter.admit("x", None, "s", "tools/call") is None
        assert limiter.admit("x", None, "s", "tools/call") is not None
        redis.stop()
        started = time.monotonic()
        for _ in range(5):
            assert limiter.admit("x", None, "s", "tools/call") is None  # fail open
        assert time.monotonic() - started < REDIS_TIMEOUT_S * 5 + 0.5  # one bounded try, then no wait at all
        bucket = limiter.report()["buckets"][0]
        assert bucket["fail_open"] == 5 and bucket["refused"] == 1
        assert not limiter.report()["redis"]["up"]
        redis.start()  # the bucket was lost with Redis: full again
        wait_until(lambda: limiter.admit("x", None, "s", "tools/call") is not None, 10,
                   message="limits checked in Redis again")
        assert time.monotonic() - started >= QUIET_S  # not asked again before its quiet second was over
    finally:
        limiter.close()


# Keeps a real Redis busy (it serves nobody else meanwhile) for ARGV[1] seconds of its own clock.
BUSY = """local s = redis.call('TIME'); local start = s[1] * 1e6 + s[2]
while true do local t = redis.call('TIME'); if t[1] * 1e6 + t[2] - start > tonumber(ARGV[1]) * 1e6 then return 1 end end"""


def test_a_slow_redis_costs_one_call_the_bound_and_no_more(redis):
    limiter = _limiter(redis, profiles={"bots": Rate(60.0, 5)})
    try:
        assert limiter.admit("bot", "bots", "s", "tools/call") is None  # the link is open, the script loaded
        import redis as redis_py
        blocker = redis_py.Redis.from_url(redis.url)
        busy = threading.Thread(target=lambda: blocker.eval(BUSY, 0, 1.0))
        busy.start()
        try:
            wait_until(lambda: _blocked(redis.url), 5, message="Redis busy")
            started = time.monotonic()
            assert limiter.admit("bot", "bots", "s", "tools/call") is None  # gave up: fail open
            took = time.monotonic() - started
            assert took < REDIS_TIMEOUT_S * 3, took  # one bound, never redis-py's retries on top
            assert limiter.admit("bot", "bots", "s", "tools/call") is None  # quiet: not even tried
            assert time.monotonic() - started < REDIS_TIMEOUT_S * 3
        finally:
            busy.join()
            blocker.close()
        bucket = limiter.report()["buckets"][0]
        assert (bucket["allowed"], bucket["fail_open"]) == (1, 2)
    finally:
        limiter.close()


def _blocked(url: str) -> bool:
    """True while Redis takes longer than 0.1 s to answer a PING."""
    import redis as redis_py
    from redis.backoff import NoBackoff
    from redis.retry import Retry
    probe = redis_py.Redis.from_url(url, socket_timeout=0.1, retry=Retry(NoBackoff(), 0))
    try:
        probe.ping()
        return False
    except redis_py.TimeoutError:
        return True
    finally:
        probe.close()
