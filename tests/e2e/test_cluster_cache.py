"""`cache.backend: redis`: two troupes on one real Redis share cached answers (an answer one instance
got from its own backend process is served by the other, marked as a hit), and an invalidation on
one instance (its server's list_changed) reaches the shared entries."""
from __future__ import annotations

import pytest
import yaml

from tests.e2e.test_caching import backend, hit_meta
from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, text_of, write_config

pytestmark = pytest.mark.slow  # two troupes and a redis-server


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


def _joined(url: str) -> McpHttp | None:
    """A session with the instance at `url` once it has joined its cluster (until then: None)."""
    try:
        return McpHttp(url)
    except AssertionError:  # "not joined its cluster yet"
        return None


def test_two_instances_share_the_cache_through_redis(tmp_path, redis):
    # replicated: each instance runs its own backend process, so an answer names the one that made it
    config = write_config(tmp_path, [backend("c", {"ttl": 600}, placement="replicated")], mode="flat",
                          json_response=True)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 3},
                                                           "cache": {"backend": "redis", "max_bytes": 1 << 20}}))
    troupes = [TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path / f"conf{i}")}) for i in range(2)]
    clients: list[McpHttp] = []
    try:
        for t in troupes:
            clients.append(wait_until(lambda t=t: _joined(t.url), 30, interval=0.2, message="the cluster joined"))
        a, b = clients

        def shared() -> bool:
            """a's answer (stored, or a hit) served by b as a hit: b's own backend would name its pid."""
            made = a.call("c__lookup", {"key": "shared"})
            seen = b.call("c__lookup", {"key": "shared"})
            return hit_meta(seen) is not None and text_of(seen) == text_of(made)
        wait_until(shared, 30, interval=0.2, message="b to serve a's cached answer")
        pids = {text_of(c.call("c__bump")).split()[-1] for c in clients}
        assert len(pids) == 2  # two backend processes: the shared answer came through Redis
        before = text_of(b.call("c__lookup", {"key": "shared"}))
        assert text_of(a.call("c__grow")) == "added extra1"  # list_changed on a's server
        wait_until(lambda: hit_meta(r := b.call("c__lookup", {"key": "shared"})) is None
                   and text_of(r) != before, 15, interval=0.1, message="the shared entry to be dropped")
        status = [c.request("tools/call", {"name": "core_status", "arguments": {}}) for c in clients]
        caches = [yaml.safe_load(text_of(s))["cache"] for s in status]
        assert all(cache["backend"] == "redis" for cache in caches)
        assert caches[1]["hits"] >= 1 and caches[0]["stores"] >= 1
    finally:
        for c in clients:
            c.close()
        for t in troupes:
            t.stop()
