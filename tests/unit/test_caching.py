"""The response cache's parts on their own: the byte-bounded LRU with TTLs (an injected clock, no
sleeps), keys (canonical arguments, profiles apart), the policy, the config sections, the answer
marker and the Redis backend's local byte account."""
from __future__ import annotations

from types import MappingProxyType

import orjson
import pytest

from actors.caching import keys, policy
from actors.caching.redis_store import RemoteIndex
from actors.caching.session_side import marked
from actors.caching.store import ENTRY_OVERHEAD, ByteLru
from actors.settings import cache_section
from actors.settings.cache_section import ServerCache
from actors.settings.config import ConfigError, from_data


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(server: str, n: int, who: str = "-") -> keys.CacheKey:
    return keys.tool_key(server, "t", {"n": n}, who)


# ---------------------------------------------------------------- store


def test_lru_evicts_least_recently_used_by_bytes():
    body = b"x" * 100
    size = len(body) + ENTRY_OVERHEAD
    store = ByteLru(max_bytes=3 * size, clock=Clock())
    for n in range(3):
        assert store.put(key("s", n), body, 60)
    assert store.get(key("s", 0)) is not None  # 0 is now the most recently used
    store.put(key("s", 3), body, 60)  # one too many: 1, the least recently used, goes
    assert store.get(key("s", 1)) is None
    assert all(store.get(key("s", n)) is not None for n in (0, 2, 3))
    assert store.total.evictions == 1 and store.total.bytes == 3 * size and len(store) == 3


def test_a_big_entry_evicts_as_many_as_it_needs_and_a_too_big_one_none():
    store = ByteLru(max_bytes=1000, clock=Clock())
    for n in range(5):
        store.put(key("s", n), b"x" * 100, 60)
    assert store.put(key("s", 9), b"y" * 600, 60)
    assert store.total.bytes <= 1000 and store.get(key("s", 9)) is not None
    assert store.total.evictions == 3  # 5 × 164 + 664 > 1000; 2 × 164 + 664 = 992 fits
    assert not store.put(key("s", 10), b"z" * 1000, 60)  # bigger than the whole bound
    assert store.get(key("s", 9)) is not None and store.total.evictions == 3


def test_ttl_expiry_on_the_injected_clock():
    clock = Clock()
    store = ByteLru(max_bytes=10_000, clock=clock)
    store.put(key("s", 1), b"a", 5)
    store.put(key("s", 2), b"b", 50)
    clock.now += 4.9
    entry = store.get(key("s", 1))
    assert entry is not None and clock.now - entry.stored_at == pytest.approx(4.9)
    clock.now += 0.2
    assert store.get(key("s", 1)) is None and store.get(key("s", 2)) is not None
    assert (store.total.expired, store.total.entries) == (1, 1)
    assert (store.total.hits, store.total.misses) == (2, 1)


def test_replacing_an_entry_counts_its_bytes_once():
    store = ByteLru(max_bytes=10_000, clock=Clock())
    store.put(key("s", 1), b"a" * 10, 5)
    store.put(key("s", 1), b"a" * 20, 5)
    assert store.total.entries == 1 and store.total.bytes == 20 + ENTRY_OVERHEAD


def test_invalidate_a_server_or_one_resource():
    store = ByteLru(max_bytes=100_000, clock=Clock())
    store.put(key("a", 1), b"1", 60)
    store.put(key("a", 2), b"2", 60)
    store.put(key("b", 1), b"3", 60)
    doc, other = keys.resource_key("a", "mem://doc", "-"), keys.resource_key("a", "mem://other", "-")
    store.put(doc, b"4", 60)
    store.put(other, b"5", 60)
    assert store.invalidate("a", "mem://doc") == 1
    assert store.get(doc) is None and store.get(other) is not None and store.get(key("a", 1)) is not None
    assert store.invalidate("a") == 3
    assert store.get(key("b", 1)) is not None
    assert store.servers["a"].entries == 0 and store.servers["a"].invalidated == 4
    assert store.total.entries == 1


# ---------------------------------------------------------------- keys


def test_keys_are_canonical_and_keep_profiles_apart():
    a = keys.tool_key("s", "t", {"x": 1, "y": {"b": 2, "a": 1}}, keys.audience("p1"))
    b = keys.tool_key("s", "t", {"y": {"a": 1, "b": 2}, "x": 1}, keys.audience("p1"))
    assert a == b and a.digest() == b.digest()
    assert keys.tool_key("s", "t", {"x": 1, "y": {"b": 2, "a": 1}}, keys.audience("p2")) != a
    assert keys.tool_key("s", "t", {"x": 1, "y": {"b": 2, "a": 1}}, keys.audience(None)) != a
    assert keys.tool_key("s", "u", {"x": 1, "y": {"b": 2, "a": 1}}, keys.audience("p1")) != a
    assert keys.tool_key("s2", "t", {"x": 1, "y": {"b": 2, "a": 1}}, keys.audience("p1")) != a
    assert keys.tool_key("s", "t", {"x": "1", "y": {"b": 2, "a": 1}}, keys.audience("p1")) != a
    assert keys.audience("p", "alice") != keys.audience("p", "bob") != keys.audience("p")
    # a tool key never equals a resource key, whatever the strings
    assert keys.resource_key("s", "t", "-") != keys.tool_key("s", "t", {}, "-")


# ---------------------------------------------------------------- policy


def test_policy_reads_only():
    read_only = {"annotations": {"readOnlyHint": True}}
    cache = ServerCache(30.0, MappingProxyType({"named": 5.0, "off": 0.0}))
    assert policy.tool_ttl(cache, "any", read_only) == 30.0
    assert policy.tool_ttl(cache, "any", {}) is None
    assert policy.tool_ttl(cache, "any", {"annotations": {"readOnlyHint": "yes"}}) is None
    assert policy.tool_ttl(cache, "named", {}) == 5.0  # named: cached without the annotation
    assert policy.tool_ttl(cache, "off", read_only) is None  # 0: never
    assert policy.tool_ttl(None, "any", read_only) is None
    assert policy.tool_ttl(ServerCache(None, MappingProxyType({"named": 5.0})), "any", read_only) is None
    assert policy.resource_ttl(cache) == 30.0
    assert policy.resource_ttl(ServerCache(30.0, resources=0.0)) is None
    assert policy.resource_ttl(ServerCache(None, resources=9.0)) == 9.0
    assert policy.resource_ttl(ServerCache(None)) is None


def test_only_plain_successes_are_stored():
    assert policy.storable({"content": []})
    assert policy.storable({"contents": [], "resultType": "complete"})
    assert not policy.storable({"content": [], "isError": True})
    assert not policy.storable({"resultType": "input_required", "inputRequests": {}})
    assert not policy.storable(None)


def test_marked_answer():
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "_meta": {"other": 1}}}
    out = marked(answer, 1.23456)
    assert out["result"]["_meta"] == {"other": 1, "troupe/cache": {"hit": True, "age_s": 1.235}}
    assert answer["result"]["_meta"] == {"other": 1}  # the original is left alone
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": "x"}}
    assert marked(error, 1.0) == error


# ---------------------------------------------------------------- config


def config_problems(data) -> list[str]:
    with pytest.raises(ConfigError) as err:
        from_data(data)
    return err.value.problems


def server_with(cache) -> dict:
    return {"servers": [{"name": "s", "transport": {"type": "stdio", "stdio": {"command": "x"}}, "cache": cache}]}


def test_config_server_cache():
    cfg = from_data(server_with({"ttl": 60, "tools": {"a": 5, "b": {"ttl": 7}, "c": 0}, "resources": 0}))
    cache = cfg.servers[0].cache
    assert cache.ttl == 60.0 and dict(cache.tools) == {"a": 5.0, "b": 7.0, "c": 0.0} and cache.resources == 0.0
    assert from_data(server_with(30)).servers[0].cache.ttl == 30.0  # the short form
    assert from_data(server_with(None)).servers[0].cache is None
    assert cfg.cache == cache_section.CacheConfig()


@pytest.mark.parametrize("cache,expected", [
    ({"ttl": 0}, "servers[0].cache.ttl: must be a positive number of seconds, got 0"),
    ({"ttl": -3}, "servers[0].cache.ttl: must be a positive number"),
    ({"ttl": True}, "servers[0].cache.ttl: must be a positive number"),
    ({"ttl": float("nan")}, "servers[0].cache.ttl: must be a positive number"),
    ({"ttl": 5, "size": 1}, "servers[0].cache.size: unknown key (allowed: resources, tools, ttl)"),
    ({"tools": ["a"]}, "servers[0].cache.tools: must be a mapping"),
    ({"tools": {"a": -1}}, "servers[0].cache.tools.a: must be a positive number of seconds (or 0"),
    ({"tools": {"a": {"ttl": 1, "x": 2}}}, "servers[0].cache.tools.a.x: unknown key (allowed: ttl)"),
    ("soon", "servers[0].cache: must be a mapping like {ttl: 60}"),
])
def test_config_server_cache_errors(cache, expected):
    problems = config_problems(server_with(cache))
    assert any(expected in p for p in problems), problems


def test_config_store_section():
    cfg = from_data({"servers": [], "cache": {"max_bytes": 1024, "backend": "memory"}})
    assert cfg.cache == cache_section.CacheConfig(1024, "memory")
    assert any("cache.max_bytes: must be a positive whole number" in p
               for p in config_problems({"cache": {"max_bytes": -1}}))
    assert any("cache.backend: 'disk' is not one of memory, redis" in p
               for p in config_problems({"cache": {"backend": "disk"}}))
    assert any("cache.ttl: unknown key" in p and "servers[i].cache.ttl" in p
               for p in config_problems({"cache": {"ttl": 5}}))
    assert cache_section.check_backend(cache_section.CacheConfig(backend="redis"), None)
    assert not cache_section.check_backend(cache_section.CacheConfig(backend="redis"), object())


# ---------------------------------------------------------------- the Redis backend's local account


def test_remote_index_bounds_this_instances_writes():
    index = RemoteIndex(max_bytes=3 * (10 + ENTRY_OVERHEAD))
    for n in range(3):
        assert index.wrote(key("s", n), b"x" * 10) == []
    index.read(key("s", 0), hit=True)  # most recently used now
    assert index.wrote(key("s", 3), b"x" * 10) == [key("s", 1)]
    assert index.wrote(key("s", 4), b"x" * 10_000) is None
    index.invalidated("s", None)
    assert (index.total.entries, index.total.bytes, index.total.invalidated) == (0, 0, 3)
    assert (index.total.hits, index.total.evictions) == (1, 1)
    assert orjson.loads(orjson.dumps(index.total.to_json()))["stores"] == 4
