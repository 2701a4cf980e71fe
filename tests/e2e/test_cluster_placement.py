"""A `single` server in a cluster of three troupes on one real Redis: it runs on exactly one of
them, every instance's calls reach that one process (one monotonic counter), and when its owner
is killed the server moves to another instance within a lease plus a restart, leaving no
orphan, while a call in flight through another instance gets an answer, never silence."""
from __future__ import annotations

import os
import signal
import threading
import uuid
from pathlib import Path

import pytest
import requests
import yaml

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # three troupes and a redis-server
LEASE = 5  # seconds; short enough for the test, long enough for a busy CI machine


@pytest.fixture
def cluster(tmp_path):
    redis = RedisServer(tmp_path).start()
    tag = uuid.uuid4().hex
    config = write_config(tmp_path, [server("counter", "tests.servers.counter", "--tag", tag)], mode="flat",
                          json_response=True)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": LEASE}}))
    troupes = [TroupeHttp(config) for _ in range(3)]
    yield troupes, tag
    for t in troupes:
        if t.proc.poll() is None:
            t.stop()
    redis.stop()


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _counter(t: TroupeHttp) -> dict:
    return next(s for s in _status(t)["servers"] if s["name"] == "counter")


def _processes(tag: str) -> list[int]:
    """Live (not zombie) processes whose command line carries the tag."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if tag.encode() in (entry / "cmdline").read_bytes() and "State:\tZ" not in (entry / "status").read_text():
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _text(answer: dict) -> str:
    assert "result" in answer, answer
    return answer["result"]["content"][0]["text"]


def _all_ready(troupes) -> bool:
    return all(_counter(t)["state"] == "ready" for t in troupes if t.proc.poll() is None)


def test_one_counter_for_the_whole_cluster_and_it_moves_when_its_owner_dies(cluster):
    troupes, tag = cluster
    wait_until(lambda: _all_ready(troupes), 30, message="counter ready on every instance")
    owners = [t for t in troupes if "counter" in _status(t)["cluster"]["owned"]]
    assert len(owners) == 1, [_status(t)["cluster"] for t in troupes]
    assert len(_processes(tag)) == 1
    clients = [McpHttp(t.url) for t in troupes]
    seen = [int(_text(clients[i % 3].call("counter__next"))) for i in range(30)]
    assert seen == list(range(1, 31))  # one process's counter, through all three instances
    old_pid = int(_text(clients[0].call("counter__pid")))
    assert _processes(tag) == [old_pid]

    # a call in flight through another instance when the owner dies gets an answer
    owner = owners[0]
    other = next(i for i, t in enumerate(troupes) if t is not owner)
    answers: list = []
    waiting = threading.Thread(target=lambda: answers.append(clients[other].call("counter__sleep", {"seconds": 30},
                                                                                  timeout=60)))
    waiting.start()
    wait_until(lambda: _counter(owner)["in_flight"] >= 1, 10, message="the call in flight at the owner")
    os.kill(owner.proc.pid, signal.SIGKILL)
    owner.proc.wait(timeout=10)
    waiting.join(timeout=60)
    assert answers and (answers[0].get("error") or answers[0]["result"].get("isError")), answers
    survivors = [t for t in troupes if t is not owner]
    wait_until(lambda: _all_ready(survivors) and _processes(tag) and old_pid not in _processes(tag),
               LEASE + 20, message="counter moved to a live instance")
    assert len(_processes(tag)) == 1  # no orphan, and not two
    assert len([t for t in survivors if "counter" in _status(t)["cluster"]["owned"]]) == 1
    # its new place serves it through every instance (a relay lists it once the owner answers)
    def callable_again() -> bool:
        answer = clients[other].call("counter__pid")
        return "result" in answer and not answer["result"].get("isError")
    wait_until(callable_again, 20, message="counter callable again")
    new_pid = int(_text(clients[other].call("counter__pid")))
    assert new_pid != old_pid and _processes(tag) == [new_pid]
    for c in clients:
        c.close()
