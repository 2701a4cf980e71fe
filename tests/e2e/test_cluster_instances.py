"""Several troupes on one real Redis see each other: each /status lists every live instance
with its URL, start and heartbeat; one that stops leaves the list at once; a Redis that goes
away is reported (a running call finishes and new ones are served), and its return is noticed
with no restart of troupe."""
from __future__ import annotations

import threading

import pytest
import requests
import yaml

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # three troupes and a redis-server


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _instances(t: TroupeHttp) -> list[str]:
    return [i["url"] for i in _status(t)["instances"]]


def test_instances_see_each_other_and_a_stopped_one_leaves_at_once(tmp_path, redis):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", placement="replicated")], mode="flat")
    troupes = [TroupeHttp(config, "--redis", redis.url) for _ in range(3)]
    try:
        urls = sorted(t.base for t in troupes)
        for t in troupes:
            wait_until(lambda t=t: sorted(_instances(t)) == urls, 15, message="every instance listed")
        entry = _status(troupes[0])["instances"][0]
        assert {"instance", "url", "started", "heartbeat", "servers"} <= set(entry)
        cluster = _status(troupes[0])["cluster"]
        assert cluster["up"] is True and cluster["advertise"] == troupes[0].base and cluster["lease_s"] == 10.0
        assert troupes[2].stop() == 0
        gone = troupes[2].base
        wait_until(lambda: gone not in _instances(troupes[0]), 2, message="the stopped instance left the list")
    finally:
        for t in troupes:
            t.stop()


def test_a_redis_outage_is_reported_and_recovered_from_without_a_restart(tmp_path, redis):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", placement="replicated")], mode="flat",
                          json_response=True)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 2}}))
    t = TroupeHttp(config)
    try:
        wait_until(lambda: _status(t)["cluster"]["up"], 10, message="joined")
        client = McpHttp(t.url)
        running: dict = {}
        call = threading.Thread(target=lambda: running.update(client.call("echo__sleep", {"seconds": 3})))
        call.start()
        wait_until(lambda: _status(t)["servers"][0]["in_flight"] == 1, 10, message="the call running")
        redis.stop()
        wait_until(lambda: not _status(t)["cluster"]["up"], 10, message="the outage reported")
        call.join(30)
        assert running["result"]["content"][0]["text"] == "slept", running  # a running call finishes
        assert client.call("echo__echo", {"text": "during"})["result"]["content"][0]["text"] == "during"
        client.close()
        down = _status(t)["cluster"]
        assert down["reason"] and "error" in down["instances"]  # says why, and lists no instance it cannot read
        assert _status(t)["instances"] == []
        # troupe keeps serving what needs no Redis
        wait_until(lambda: any(s["name"] == "echo" and s["state"] == "ready" for s in _status(t)["servers"]), 10,
                   message="echo still ready")
        redis.start()
        wait_until(lambda: _status(t)["cluster"]["up"] and _instances(t) == [t.base], 20,
                   message="back in the cluster after Redis returned")
        assert t.proc.poll() is None
    finally:
        assert t.stop() == 0
