"""The response cache against a real troupe process and a backend that counts its calls
(tests/servers/cached.py): hits, misses, expiry, invalidation on list_changed, on a resource update
and on a restart; what is never cached; the _meta marker; the figures in /status and /metrics."""
from __future__ import annotations

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.troupe import TroupeHttp, server, text_of

RESTART = {"min_backoff": 0.05, "max_backoff": 0.2, "intensity": 50, "period": 60}


def backend(name: str, cache=None, **extra) -> dict:
    entry = server(name, "tests.servers.cached", pin=False, restart=RESTART, **extra)
    if cache is not None:
        entry["cache"] = cache
    return entry


def hit_meta(response: dict) -> dict | None:
    return ((response["result"].get("_meta") or {}).get("troupe/cache"))


def counter(response: dict) -> str:
    """`lookup key #3 pid 123` → `#3 pid 123`: which real call made this answer."""
    return text_of(response).split(" ", 2)[-1]


def test_hit_miss_and_meta(make):
    t = make([backend("c", {"ttl": 60})])
    first = t.call("c__lookup", {"key": "a", "n": 1})
    assert hit_meta(first) is None and counter(first).startswith("#1 ")
    again = t.call("c__lookup", {"n": 1, "key": "a"})  # the same arguments in another order: one key
    assert text_of(again) == text_of(first)
    meta = hit_meta(again)
    assert meta is not None and meta["hit"] is True and 0 <= meta["age_s"] < 60
    other = t.call("c__lookup", {"key": "b", "n": 1})  # other arguments: a miss, a real call
    assert hit_meta(other) is None and counter(other).startswith("#2 ")
    cache = t.status()["cache"]
    assert cache["backend"] == "memory"
    assert (cache["hits"], cache["misses"], cache["stores"], cache["entries"]) == (1, 2, 2, 2)
    assert cache["servers"]["c"]["hits"] == 1 and cache["bytes"] > 0


def test_only_reads_are_cached(make):
    t = make([backend("c", {"ttl": 60}), backend("named", {"tools": {"fetch": 60}}), backend("plain")])
    # not read-only: every call reaches the server
    assert [counter(t.call("c__bump", {"key": "x"}))[:2] for _ in range(3)] == ["#1", "#2", "#3"]
    # no readOnlyHint and not named: never cached
    assert [counter(t.call("c__fetch", {"key": "x"}))[:2] for _ in range(2)] == ["#1", "#2"]
    # named in cache.tools: cached without the annotation
    named = [t.call("named__fetch", {"key": "x"}) for _ in range(2)]
    assert text_of(named[0]) == text_of(named[1]) and hit_meta(named[1]) is not None
    # named has no server ttl: its read-only tool is not cached
    assert [counter(t.call("named__lookup", {"key": "x"}))[:2] for _ in range(2)] == ["#1", "#2"]
    # a server without cache: nothing cached, read-only or not
    assert [counter(t.call("plain__lookup", {"key": "x"}))[:2] for _ in range(2)] == ["#1", "#2"]
    # an isError result is never kept
    failed = [t.call("c__fails") for _ in range(2)]
    assert [text_of(r) for r in failed] == ["failed #1", "failed #2"]
    assert hit_meta(failed[1]) is None
    cache = t.status()["cache"]
    assert cache["servers"]["named"]["hits"] == 1 and "plain" not in cache["servers"]
    assert cache["stores"] == 1  # named__fetch alone


def test_expiry(make):
    t = make([backend("c", {"ttl": 1.0})])
    first = counter(t.call("c__lookup", {"key": "e"}))
    assert hit_meta(t.call("c__lookup", {"key": "e"})) is not None  # well within its second
    # past its ttl the entry is a miss, and the server is called again (polled, bounded)
    fresh = wait_until(lambda: (r := t.call("c__lookup", {"key": "e"})) and hit_meta(r) is None and r,
                       timeout=10, message="the entry to expire")
    assert counter(fresh) != first
    assert t.status()["cache"]["expired"] >= 1


def test_invalidated_by_list_changed(make):
    t = make([backend("c", {"ttl": 600})])
    first = t.call("c__lookup", {"key": "l"})
    assert hit_meta(t.call("c__lookup", {"key": "l"})) is not None
    assert text_of(t.call("c__grow")) == "added extra1"  # the server sends tools/list_changed
    after = wait_until(lambda: (r := t.call("c__lookup", {"key": "l"})) and hit_meta(r) is None and r,
                       timeout=10, message="list_changed to drop the entry")
    assert counter(after) != counter(first)
    assert t.status()["cache"]["servers"]["c"]["invalidated"] >= 1


def test_resource_read_cached_and_invalidated_by_update(make):
    t = make([backend("c", {"ttl": 600})])
    uri = t.request("resources/list")["result"]["resources"][0]["uri"]
    first = t.request("resources/read", {"uri": uri})["result"]
    second = t.request("resources/read", {"uri": uri})["result"]
    assert second["contents"] == first["contents"] and second["_meta"]["troupe/cache"]["hit"] is True
    assert first["contents"][0]["uri"] == uri
    assert text_of(t.call("c__touch")) == "touched"  # notifications/resources/updated for it
    fresh = wait_until(lambda: (r := t.request("resources/read", {"uri": uri})["result"])
                       and "_meta" not in r and r, timeout=10, message="the update to drop the entry")
    assert fresh["contents"][0]["text"] != first["contents"][0]["text"]
    # a tool's entry of the same server survives a resource's update
    t.call("c__lookup", {"key": "r"})
    t.call("c__touch")
    wait_until(lambda: t.status()["cache"]["servers"]["c"]["invalidated"] >= 2, timeout=10,
               message="the second update")
    assert hit_meta(t.call("c__lookup", {"key": "r"})) is not None


def test_invalidated_by_restart(make):
    t = make([backend("c", {"ttl": 600})])
    first = t.call("c__lookup", {"key": "s"})
    assert hit_meta(t.call("c__lookup", {"key": "s"})) is not None
    pid = counter(first).split()[-1]
    t.call("c__crash", timeout=20)  # the server exits under the call; troupe restarts it
    after = wait_until(lambda: (r := t.call("c__lookup", {"key": "s"})) and "isError" not in r["result"] and r,
                       timeout=20, message="the server to be back")
    assert hit_meta(after) is None and counter(after).split()[-1] != pid


def test_profiles_do_not_share_entries(tmp_path):
    tokens = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789", "ops": "ops-token-0123456789"}
    path = tmp_path / "troupe.yaml"
    path.write_text(yaml.safe_dump({
        "servers": [backend("c", {"ttl": 600})], "discovery": {"enabled": False},
        "profiles": {"readers": {"read_only": True}, "all": {}},
        "serve": {"mode": "flat", "json_response": True, "auth_token": tokens["ops"], "startup_wait": 15,
                  "clients": [{"name": "alice", "token": tokens["alice"], "profile": "readers"},
                              {"name": "carol", "token": tokens["bob"] + "c", "profile": "readers"},
                              {"name": "bob", "token": tokens["bob"], "profile": "all"}]}}))
    t = TroupeHttp(path)
    clients = {name: McpHttp(t.url, {"Authorization": f"Bearer {token}"})
               for name, token in (("alice", tokens["alice"]), ("carol", tokens["bob"] + "c"),
                                   ("bob", tokens["bob"]))}
    try:
        alice = clients["alice"].call("c__lookup", {"key": "p"})
        assert hit_meta(alice) is None
        # another client in the same profile shares alice's entry…
        carol = clients["carol"].call("c__lookup", {"key": "p"})
        assert text_of(carol) == text_of(alice) and hit_meta(carol) is not None
        # …a client in another profile does not
        bob = clients["bob"].call("c__lookup", {"key": "p"})
        assert hit_meta(bob) is None and counter(bob) != counter(alice)
    finally:
        for client in clients.values():
            client.close()
        assert t.stop() == 0


def test_meta_mode_call_tool_and_get_resource(make):
    t = make([backend("c", {"ttl": 600})], "--mode", "meta")
    calls = [t.call("call_tool", {"name": "c__lookup", "arguments": {"key": "m"}}) for _ in range(2)]
    assert text_of(calls[0]) == text_of(calls[1]) and hit_meta(calls[1]) is not None
    reads = [t.call("get_resource", {"uri": "mem://doc"}) for _ in range(2)]
    assert reads[0]["result"]["content"] == reads[1]["result"]["content"]
    assert hit_meta(reads[1]) is not None and hit_meta(reads[0]) is None


@pytest.mark.parametrize("cache,problem", [
    ({"ttl": -1}, "servers[0].cache.ttl: must be a positive number"),
    ({"ttl": "soon"}, "servers[0].cache.ttl: must be a positive number"),
    ({"tll": 5}, "servers[0].cache.tll: unknown key"),
    ({"tools": {"x": {"tl": 1}}}, "servers[0].cache.tools.x.tl: unknown key"),
])
def test_config_errors_are_clear(tmp_path, cache, problem):
    import subprocess
    import sys
    from tests.support import ROOT
    from tests.support.troupe import write_config
    path = write_config(tmp_path, [backend("c", cache)])
    done = subprocess.run([sys.executable, "-m", "actors.main", "check", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done
    assert problem in done.stdout + done.stderr


def test_status_and_metrics_over_http(http_troupe):
    t = http_troupe([backend("c", {"ttl": 600})], json_response=True, mode="flat")
    client = McpHttp(t.url)
    try:
        for _ in range(3):
            client.call("c__lookup", {"key": "h"})
        client.call("c__bump", {"key": "h"})
    finally:
        client.close()
    status = requests.get(t.base + "/status", timeout=10).json()
    assert (status["cache"]["hits"], status["cache"]["misses"]) == (2, 1)
    samples = {}
    for family in text_string_to_metric_families(requests.get(t.base + "/metrics", timeout=10).text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    assert samples[("troupe_cache_hits_total", (("server", "c"),))] == 2
    assert samples[("troupe_cache_misses_total", (("server", "c"),))] == 1
    assert samples[("troupe_cache_entries", (("server", "c"),))] == 1
    assert samples[("troupe_cache_bytes", (("server", "c"),))] > 0


def test_modern_stateless_requests_use_the_cache(make):
    envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
    t = make([backend("c", {"ttl": 600})])
    answers = [t.request("tools/call", {"name": "c__lookup", "arguments": {"key": "modern"}, "_meta": envelope})
               for _ in range(2)]
    assert all(a["result"]["resultType"] == "complete" for a in answers)
    assert text_of(answers[0]) == text_of(answers[1])
    assert hit_meta(answers[0]) is None and hit_meta(answers[1])["hit"] is True
    # a legacy client of the same profile shares the entry the modern request made
    assert hit_meta(t.call("c__lookup", {"key": "modern"})) is not None
