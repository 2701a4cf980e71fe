"""What streams across instances of a cluster, for `single` servers run by one of two troupes:
a call made through the other instance hears its progress before its answer; resource
subscriptions made on both instances reach the server as one subscribe (the owner subscribes
upstream to their union), bring both clients the server's update, and end with one unsubscribe;
and a server's questions in the middle of a call reach the client on the other instance, in
either era, as input rounds across the relay."""
from __future__ import annotations

import asyncio
import json

import pytest
import requests
import yaml

from tests.e2e.test_cluster_list_changes import META, MODERN, _Stream
from tests.e2e.test_input_rounds import _both_servers_ask, _check_shown, _config as _input_config
from tests.support import wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # two troupes and a redis-server
URI = "watch://value"
UPDATED = "notifications/resources/updated"


def _headers(method: str) -> dict:
    return {"Accept": "text/event-stream, application/json", "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN, "Mcp-Method": method}


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _call(t: TroupeHttp, tool: str, arguments: dict | None = None, progress: str | None = None) -> list[dict]:
    """A modern tools/call; every message of its answer (SSE or JSON), in order."""
    meta = {**META, "progressToken": progress} if progress else META
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments or {}, "_meta": meta}}
    resp = requests.post(t.url, json=body, headers={**_headers("tools/call"), "Mcp-Name": tool}, timeout=30)
    assert resp.status_code == 200, resp.text[:300]
    if resp.headers["Content-Type"].startswith("application/json"):
        return [resp.json()]
    return [json.loads(line[6:]) for line in resp.text.splitlines() if line.startswith("data: ")]


def _text(messages: list[dict]) -> str:
    answer = messages[-1]
    assert "result" in answer, answer
    return answer["result"]["content"][0]["text"]


def _listen(t: TroupeHttp) -> _Stream:
    body = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
            "params": {"notifications": {"resourceSubscriptions": [URI]}, "_meta": META}}
    return _Stream(requests.post(t.url, json=body, headers=_headers("subscriptions/listen"), stream=True,
                                 timeout=30))


@pytest.fixture
def pair(tmp_path):
    redis = RedisServer(tmp_path).start()
    config = write_config(tmp_path, [server("watched", "tests.servers.watched", pin=False)], mode="flat")
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 5}}))
    troupes = [TroupeHttp(config) for _ in range(2)]
    try:
        wait_until(lambda: all(s["state"] == "ready" for t in troupes for s in _status(t)["servers"]), 30,
                   message="watched ready on both instances")
        owner = next(t for t in troupes if "watched" in _status(t)["cluster"]["owned"])
        yield owner, next(t for t in troupes if t is not owner)
    finally:
        for t in troupes:
            t.stop()
        redis.stop()


def _subscriptions(t: TroupeHttp) -> dict:
    return json.loads(_text(_call(t, "watched__subscriptions")))


def test_progress_of_a_call_through_another_instance_comes_before_its_answer(pair):
    owner, other = pair
    messages = _call(other, "watched__count_slowly", {"steps": 3}, progress="p-1")
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [("p-1", 1, 3), ("p-1", 2, 3),
                                                                                   ("p-1", 3, 3)], messages
    assert _text(messages) == "counted 3"
    # Without a token the same call is one plain answer.
    assert _text(_call(other, "watched__count_slowly", {"steps": 2})) == "counted 2"


def test_subscriptions_on_two_instances_are_one_subscription_upstream(pair):
    owner, other = pair
    streams = [_listen(owner)]
    try:
        wait_until(lambda: _subscriptions(owner)["subscribed"] == [URI], 15, message="the owner's client subscribed")
        streams.append(_listen(other))
        wait_until(lambda: "notifications/subscriptions/acknowledged" in streams[1].methods(), 15,
                   message="the other instance's listen acknowledged")

        def both_heard() -> bool:
            _call(owner, "watched__bump")  # again until the other instance's subscription reaches the owner
            return all(UPDATED in s.methods() for s in streams)
        wait_until(both_heard, 20, interval=0.5, message="both clients heard the update")
        updates = [m for s in streams for m in s.messages if m.get("method") == UPDATED]
        assert all(m["params"]["uri"] == URI for m in updates), updates
        assert _subscriptions(other)["subscribe"] == 1  # the union: one subscribe for two followers
    finally:
        for s in streams:
            s.close()
    wait_until(lambda: _subscriptions(other)["subscribed"] == [], 20, message="unsubscribed once nobody follows")
    assert _subscriptions(owner)["unsubscribe"] == 1


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_a_servers_questions_reach_a_client_on_another_instance(tmp_path, mode):
    """server-everything (legacy) elicits and samples, and a modern-only server asks in rounds,
    while the client that called sits on an instance that does not run them."""
    redis = RedisServer(tmp_path).start()
    config = _input_config(tmp_path)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 5}}))
    troupes = [TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path)}) for _ in range(2)]
    try:
        wait_until(lambda: all(s["state"] == "ready" for t in troupes for s in _status(t)["servers"]), 60,
                   message="both servers ready on both instances")
        target = next(t for t in troupes if "everything" not in _status(t)["cluster"]["owned"])
        _check_shown(asyncio.run(asyncio.wait_for(_both_servers_ask(target.url, mode), 90)))
    finally:
        for t in troupes:
            t.stop()
        redis.stop()
