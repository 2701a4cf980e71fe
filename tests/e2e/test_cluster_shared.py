"""Shared state in a cluster of three troupes on one real Redis: a tool withheld on the instance
that runs its server waits for approval on every instance, an approval made on one is seen by
the others' trust keepers, the event it publishes reaches another instance's /events marked
with its origin, and the requestState key is one for the cluster. Each troupe has its own config
directory, so nothing here can pass through a shared approvals file."""
from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import gevent
import pytest
import requests
import yaml

from actors.cluster.settings import ClusterConfig
from actors.cluster.shared import SharedState
from actors.protocol.request_state import StateSealer
from actors.trust import ledger
from tests.e2e.test_metrics import McpHttp
from tests.support import PYTHON, ROOT, wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # three troupes and a redis-server


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


@pytest.fixture
def cluster(tmp_path, redis):
    config = write_config(tmp_path, [server("rug", "tests.servers.rug_pull")], mode="flat", json_response=True)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 3}}))
    troupes = []
    try:
        for i in range(3):
            home = tmp_path / f"conf{i}"
            troupes.append(TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(home)}))
        yield troupes
    finally:
        for t in troupes:
            if t.proc.poll() is None:
                t.stop()


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _waiting(t: TroupeHttp) -> set:
    rows = requests.get(t.base + "/api/approvals", timeout=10).json()["approvals"]
    return {(r.get("what"), r.get("item"), r.get("change")) for r in rows}


def _rug_pulled_everywhere(troupes) -> None:
    """rug changes its `weather` tool after a call; the instance running it withholds the change
    and every instance's trust keeper lists it from Redis."""
    wait_until(lambda: all(next(s for s in _status(t)["servers"] if s["name"] == "rug")["state"] == "ready"
                           for t in troupes), 30, message="rug ready on every instance")
    client = McpHttp(troupes[0].url)
    try:
        client.request("tools/list")
        assert "flipped" in json.dumps(client.call("rug__flip"))
    finally:
        client.close()
    wait_until(lambda: all(("tool", "weather", "changed") in _waiting(t) for t in troupes), 20,
               message="the withheld tool listed on every instance")


class EventStream:
    """Reads one instance's /events (SSE) in a thread: each event with the time it arrived."""

    def __init__(self, base: str) -> None:
        self.events: list[tuple[float, dict]] = []
        self._response = requests.get(base + "/events", stream=True, timeout=30)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self._response.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    self.events.append((time.time(), json.loads(line[5:])))
        except (requests.RequestException, ValueError, AttributeError):
            return  # closed by the test

    def find(self, kind: str, **fields) -> tuple[float, dict] | None:
        return next(((at, e) for at, e in list(self.events)
                     if e.get("type") == kind and all(e.get(k) == v for k, v in fields.items())), None)

    def close(self) -> None:
        self._response.close()


def test_withheld_tools_and_approvals_are_the_clusters(cluster):
    troupes = cluster
    _rug_pulled_everywhere(troupes)
    names = [_status(t)["cluster"]["instance"] for t in troupes]
    assert len(set(names)) == 3
    listening = EventStream(troupes[2].base)
    try:
        wait_until(lambda: listening.events, 10, message="/events answering")
        sent = time.time()
        answer = requests.post(troupes[1].base + "/api/approvals/rug/approve", timeout=30,
                               headers={"Origin": troupes[1].base})
        assert answer.status_code == 200, answer.text
        # approved on instance 1: nothing waits on any instance within a few seconds
        wait_until(lambda: not any(_waiting(t) for t in troupes), 10, message="the approval seen everywhere")
        # ...and instance 2's /events shows instance 1's ApprovalDecided, marked with its origin
        found = wait_until(lambda: listening.find("ApprovalDecided", origin=names[1]), 10,
                           message="the approval event bridged")
        arrived, event = found
        assert event["server"] == "rug" and event["decision"] == "approved"
        print(f"\nApprovalDecided: POST to instance 1 -> instance 2's /events in {1000 * (arrived - sent):.1f} ms; "
              f"published -> received {1000 * (arrived - event['at']):.1f} ms")
    finally:
        listening.close()
    # an instance's own events carry no origin, and nothing came back to where it started
    own = EventStream(troupes[1].base)
    try:
        wait_until(lambda: own.find("ApprovalDecided"), 10, message="instance 1's history")
        assert own.find("ApprovalDecided", origin=names[1]) is None
    finally:
        own.close()


def test_the_request_state_key_and_the_ledger_are_shared(redis, tmp_path):
    a, b = (SharedState(ClusterConfig(redis.url, f"i{n}")) for n in range(2))
    try:
        sealed = StateSealer(a.state_key).seal({"round": 1}, 60)
        assert StateSealer(b.state_key).open(sealed) == {"round": 1, "exp": pytest.approx(time.time() + 60, abs=5)}
        # the ledger: both instances deciding at once both land (optimistic transactions)
        la, lb = a.ledger(str(tmp_path / "a.json")), b.ledger(str(tmp_path / "b.json"))
        jobs = [gevent.spawn(lx.update, lambda d, n=n: ledger.decide(d, f"id{n}", f"s{n}", ledger.APPROVED))
                for n, lx in enumerate((la, lb, la, lb))]
        gevent.joinall(jobs, raise_error=True)
        assert set(lb.read()["servers"]) == {"id0", "id1", "id2", "id3"}
        assert la.stamp() == lb.stamp() == (4,)
        # registrations: put on one, read on the other
        a.store().put("svc", {"command": "echo"})
        assert b.store().registrations() == {"svc": {"command": "echo"}}
        assert b.store().delete("svc") and a.store().registrations() == {}
    finally:
        a.stop()
        b.stop()


def test_the_first_ledger_in_an_empty_redis_is_seeded_from_its_file(redis, tmp_path):
    path = tmp_path / "approvals.json"
    ledger.Ledger(str(path)).update(lambda d: ledger.decide(d, "idx", "old", ledger.DENIED))
    shared = SharedState(ClusterConfig(redis.url, "seed"))
    try:
        assert shared.ledger(str(path)).read()["servers"]["idx"]["decision"] == ledger.DENIED
        # later instances read Redis, not their own files
        assert shared.ledger(str(tmp_path / "other.json")).read()["servers"]["idx"]["decision"] == ledger.DENIED
    finally:
        shared.stop()


def test_events_cross_again_once_redis_comes_back(cluster, redis):
    troupes = cluster
    wait_until(lambda: all(_status(t)["cluster"].get("events") is not None for t in troupes), 30,
               message="every bridge started")
    redis.stop()
    wait_until(lambda: not _status(troupes[0])["cluster"]["up"], 20, message="instance 0 sees Redis down")
    redis.start()  # the same port, empty: the bridges resubscribe with backoff
    name = _status(troupes[0])["cluster"]["instance"]
    listening = EventStream(troupes[1].base)
    try:
        def crossed() -> bool:
            # each deny is one ApprovalDecided on instance 0; those sent before the listener is
            # back are lost (events are news), so keep deciding until one arrives
            requests.post(troupes[0].base + "/api/approvals/rug/deny", timeout=30,
                          headers={"Origin": troupes[0].base})
            return wait_until_or_none(lambda: listening.find("ApprovalDecided", origin=name), 1.0)
        wait_until(crossed, 40, interval=0.2, message="an event bridged after Redis came back")
    finally:
        listening.close()
    assert all(t.proc.poll() is None for t in troupes)  # nobody crashed over it
    assert _status(troupes[1])["cluster"]["events"]["received"] >= 1


def wait_until_or_none(condition, timeout: float):
    """condition()'s first truthy value within `timeout`, else None (a bounded poll, no assertion)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    return None


def test_a_registration_on_one_instance_is_served_by_the_others(tmp_path, redis):
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    config = tmp_path / "troupe.yaml"
    config.write_text(yaml.safe_dump({
        "servers": [], "serve": {"mode": "flat", "json_response": True},
        "discovery": {"enabled": True, "home": str(home), "project_root": str(project),
                      "path_probe": {"enabled": False}, "health": {"enabled": False}},
        "cluster": {"redis": redis.url, "lease": 3}}))
    troupes = []
    try:
        for i in range(3):
            troupes.append(TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path / f"conf{i}")}))
        # a clustered troupe opens legacy sessions once it has joined (it refuses them with an
        # error until then, as while Redis is down)
        for t in troupes:
            wait_until(lambda t=t: requests.get(t.base + "/status", timeout=10).json()["cluster"]["joined"], 20,
                       message="joined the cluster")
        clients = [McpHttp(t.url) for t in troupes]
        entry = {"name": "reg-echo", "command": PYTHON, "args": ["-m", "tests.servers.echo", "--name", "r"],
                 "cwd": str(ROOT)}
        registered = clients[0].call("core_mcpserver_register", entry)
        assert not registered["result"].get("isError"), registered

        def state(t: TroupeHttp):
            return next((s["state"] for s in _status(t)["servers"] if s["name"] == "reg-echo"), None)
        # instances 1 and 2 read the cluster's registrations at their next discovery cycle (run now)
        for c in clients[1:]:
            assert not c.call("core_discovery_run")["result"].get("isError")
        wait_until(lambda: state(troupes[1]) == state(troupes[2]) == "pending-approval", 30,
                   message="the registration on instances 1 and 2")
        answer = requests.post(troupes[2].base + "/api/approvals/reg-echo/approve", timeout=30,
                               headers={"Origin": troupes[2].base})
        assert answer.status_code == 200, answer.text
        wait_until(lambda: state(troupes[1]) == "ready", 30, message="the registered server ready on instance 1")
        echoed = clients[1].call("reg-echo__echo", {"text": "anywhere"})
        assert "anywhere" in json.dumps(echoed), echoed
        for c in clients:
            c.close()
    finally:
        for t in troupes:
            if t.proc.poll() is None:
                t.stop()


def test_an_era_found_by_one_instance_spares_the_others_the_probe(tmp_path, redis):
    """A replicated legacy server that exits on `server/discover`: the first instance probes it
    (and starts it again with initialize); an instance started later reads the cluster's verdict
    and opens it with initialize at once."""
    record = tmp_path / "methods.txt"
    entry = server("strict", "tests.servers.strict_legacy", "--record", str(record), pin=False)
    entry["placement"] = "replicated"
    config = write_config(tmp_path, [entry], mode="flat", json_response=True)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 3}}))
    troupes = [TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path / "conf0")})]
    try:
        wait_until(lambda: _status(troupes[0])["servers"][0]["state"] == "ready", 30,
                   message="the first instance's server ready")
        assert _status(troupes[0])["servers"][0]["era"] == "legacy"
        first = record.read_text().splitlines()
        assert [line.split()[1] for line in first][:2] == ["server/discover", "initialize"], first
        troupes.append(TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path / "conf1")}))
        wait_until(lambda: _status(troupes[1])["servers"][0]["state"] == "ready", 30,
                   message="the second instance's server ready")
        later = [line.split()[1] for line in record.read_text().splitlines()[len(first):]]
        assert later[0] == "initialize" and "server/discover" not in later, later
        assert McpHttp(troupes[1].url).call("strict__echo", {"text": "hi"})["result"]["content"][0]["text"] == "hi"
    finally:
        for t in troupes:
            t.stop()


def test_troupe_approve_offline_decides_for_the_whole_cluster(cluster, tmp_path):
    """`troupe approve NAME` with a cluster's config, no --url and a config directory of its own,
    writes the decision to the cluster's Redis: every running instance stops withholding."""
    troupes = cluster
    _rug_pulled_everywhere(troupes)
    done = subprocess.run([PYTHON, "-m", "actors.main", "approve", "rug", "--config", str(tmp_path / "troupe.yaml")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TROUPE_CONFIG_DIR": str(tmp_path / "cli-home")})
    assert done.returncode == 0, done.stderr
    assert "Redis" in done.stdout, done.stdout  # it says where the decision went
    wait_until(lambda: not any(_waiting(t) for t in troupes), 10, message="the approval seen everywhere")
    assert not (tmp_path / "cli-home" / "approvals.json").exists()
