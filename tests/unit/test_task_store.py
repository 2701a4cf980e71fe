"""A cluster's minted task records in Redis (actors/tasks/shared_store.py, clustered.py), without
Redis: snapshots round-trip through RedisTasks over a fake link, damaged values are no task, a
terminal status is never overwritten, and a task whose instance is gone is answered as failed
(and written back) with an error naming that instance."""
from __future__ import annotations

import time

import orjson

from actors.cluster.link import LinkDown
from actors.messages import UpstreamError
from actors.protocol import jsonrpc
from actors.tasks import clustered
from actors.tasks import shared_store as snaps
from actors.tasks.ids import TaskRef
from actors.tasks.messages import TaskOp
from actors.tasks.records import Record
from actors.tasks.shared_store import RedisTasks

LIVE_S = 7200.0
KEEP_S = 600.0


class FakeRedis:
    """The few commands RedisTasks sends, on dicts (PUT_SCRIPT's rule in Python)."""

    def __init__(self) -> None:
        self.hashes: dict[str, dict[str, bytes]] = {}
        self.strings: dict[str, bytes] = {}
        self.expiry: dict[str, int] = {}

    def eval(self, script, numkeys, key, status, doc, ttl):
        assert script == snaps.PUT_SCRIPT and numkeys == 1
        current = self.hashes.get(key, {}).get("status")
        if current is not None and current.decode() in ("completed", "failed", "cancelled"):
            return 0
        self.hashes[key] = {"status": status.encode(), "doc": doc}
        self.expiry[key] = ttl
        return 1

    def pipeline(self, transaction=True):
        return FakePipeline(self)

    def hget(self, key, field):
        return self.hashes.get(key, {}).get(field)

    def get(self, key):
        return self.strings.get(key)

    def delete(self, key):
        return int(self.hashes.pop(key, None) is not None)


class FakePipeline:
    def __init__(self, redis: FakeRedis) -> None:
        self.redis, self.calls = redis, []

    def eval(self, *args):
        self.calls.append(args)

    def execute(self):
        return [self.redis.eval(*args) for args in self.calls]


class FakeLink:
    """RedisLink's interface: run(command), key(...), failed; `down` makes every command fail."""

    def __init__(self) -> None:
        self.client, self.prefix, self.failed, self.down = FakeRedis(), "troupe", False, False

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def run(self, command):
        if self.down:
            raise LinkDown("ConnectionError: refused")
        return command(self.client)


def _record(status: str = "working") -> Record:
    record = Record("r1", "echo", "", "client:alice", "client:alice", minted=True)
    record.task_id, record.issued, record.poll_ms = "sealed-id", True, 1000
    if status == "completed":
        record.result = {"content": [{"type": "text", "text": "slept"}]}
        record.touch("completed")
    return record


def _snap(record: Record, since: float = 100.0) -> dict:
    return snaps.snapshot(record.view(KEEP_S), "a:1", since, record.owner, record.server, record.created)


def _op(method: str, replies: list, task_id: str = "sealed-id", owner: str = "client:alice") -> TaskOp:
    ref = TaskRef(task_id, "echo", "r1", owner, True, "")
    return TaskOp(method, ref, {"taskId": task_id}, None, owner, False, replies.append, None, 1)


def test_a_snapshot_round_trips_through_the_store():
    link = FakeLink()
    store = RedisTasks(link)  # type: ignore[arg-type]  (the fake stands in for a RedisLink)
    record = _record("completed")
    snap = _snap(record)
    assert store.put("r1", snap, LIVE_S) is True
    back = store.get("r1")
    assert back == snaps.decode(snaps.encode(snap))
    assert back is not None and back["task"]["result"] == record.result
    assert back["task"]["taskId"] == "sealed-id" and back["task"]["status"] == "completed"
    assert (back["instance"], back["owner"], back["server"]) == ("a:1", "client:alice", "echo")
    assert "troupe:task:r1" in link.client.hashes
    store.delete("r1")
    assert store.get("r1") is None


def test_a_running_task_lives_as_long_as_its_id_a_finished_one_as_its_result():
    running, done = _snap(_record()), _snap(_record("completed"))
    assert snaps.ttl_ms(running, LIVE_S) == int(LIVE_S * 1000)
    assert KEEP_S * 1000 < snaps.ttl_ms(done, LIVE_S) <= (KEEP_S + snaps.EXPIRY_MARGIN_S) * 1000 + 1000


def test_damaged_or_foreign_values_are_no_task():
    good = orjson.loads(snaps.encode(_snap(_record())))
    assert snaps.decode(orjson.dumps(good)) is not None
    assert snaps.decode(b"not json") is None
    assert snaps.decode(b"[1, 2]") is None
    assert snaps.decode(orjson.dumps({**good, "instance": 7})) is None
    assert snaps.decode(orjson.dumps({**good, "since": True})) is None
    assert snaps.decode(orjson.dumps({**good, "task": {**good["task"], "status": "sleeping"}})) is None


def test_a_terminal_status_is_never_overwritten():
    store = RedisTasks(FakeLink())  # type: ignore[arg-type]
    record = _record()
    assert store.put("r1", _snap(record), LIVE_S)
    failed = snaps.lost(_snap(record), KEEP_S)
    assert store.put("r1", failed, LIVE_S)
    record.result = {"content": []}
    record.touch("completed")
    assert store.put("r1", _snap(record), LIVE_S) is False  # a late runner does not undo the verdict
    assert store.get("r1")["task"]["status"] == "failed"  # type: ignore[index]


def test_a_lost_task_fails_with_an_error_naming_its_instance():
    record = _record()
    record.status_message = "half way"
    task = snaps.lost(_snap(record), KEEP_S)["task"]
    assert task["status"] == "failed" and "statusMessage" not in task
    assert task["error"] == {"code": jsonrpc.INTERNAL_ERROR,
                             "message": "troupe instance a:1 that ran this task stopped; its result is lost"}
    assert task["ttlMs"] >= KEEP_S * 1000


def test_an_instance_is_alive_while_its_heartbeat_is_of_the_run_that_wrote_the_task():
    snap = _snap(_record(), since=100.0)
    assert snaps.alive(snap, {"started": 99.0}) is True
    assert snaps.alive(snap, None) is False  # no heartbeat: past its lease
    assert snaps.alive(snap, {"started": 150.0}) is False  # restarted under the same name: its tasks are gone


def test_another_instances_running_task_is_answered_from_redis():
    link = FakeLink()
    store = RedisTasks(link)  # type: ignore[arg-type]
    store.put("r1", _snap(_record()), LIVE_S)
    link.client.strings["troupe:instance:a:1"] = orjson.dumps({"started": 50.0})
    replies: list = []
    clustered.remote_op(store, _op("tasks/get", replies), KEEP_S, LIVE_S)
    assert replies[0]["status"] == "working" and replies[0]["resultType"] == "complete"
    clustered.remote_op(store, _op("tasks/cancel", replies), KEEP_S, LIVE_S)
    refused = replies[1]
    assert isinstance(refused, UpstreamError) and refused.code == jsonrpc.INVALID_PARAMS
    assert "troupe instance a:1" in refused.message


def test_a_task_of_a_gone_instance_is_failed_and_written_back():
    link = FakeLink()
    store = RedisTasks(link)  # type: ignore[arg-type]
    store.put("r1", _snap(_record()), LIVE_S)  # no heartbeat of a:1: it is gone
    replies: list = []
    clustered.remote_op(store, _op("tasks/get", replies), KEEP_S, LIVE_S)
    assert replies[0]["status"] == "failed"
    assert replies[0]["error"]["message"] == snaps.lost_message("a:1")
    assert store.get("r1")["task"]["status"] == "failed"  # type: ignore[index]
    clustered.remote_op(store, _op("tasks/result", replies), KEEP_S, LIVE_S)
    assert isinstance(replies[1], UpstreamError) and replies[1].message == snaps.lost_message("a:1")


def test_an_id_the_snapshot_does_not_match_and_a_redis_outage_are_answered():
    link = FakeLink()
    store = RedisTasks(link)  # type: ignore[arg-type]
    store.put("r1", _snap(_record()), LIVE_S)
    replies: list = []
    clustered.remote_op(store, _op("tasks/get", replies, owner="client:mallory"), KEEP_S, LIVE_S)
    assert isinstance(replies[0], UpstreamError) and replies[0].code == jsonrpc.INVALID_PARAMS
    assert "unknown task" in replies[0].message
    link.down = True
    started = time.monotonic()
    clustered.remote_op(store, _op("tasks/get", replies), KEEP_S, LIVE_S)
    assert isinstance(replies[1], UpstreamError) and replies[1].code == jsonrpc.SERVER_UNAVAILABLE
    assert "Redis" in replies[1].message and time.monotonic() - started < 1.0


def test_a_write_redis_refused_is_written_once_it_is_back(monkeypatch):
    """A task's last change (its end) has no later one to carry it: the writer keeps it and tries
    again until Redis takes it, so the task never stays `working` there."""
    import gevent
    monkeypatch.setattr(clustered, "RETRY_S", 0.01)
    link = FakeLink()
    shared = clustered.SharedTasks(RedisTasks(link), KEEP_S, LIVE_S)  # type: ignore[arg-type]
    shared.instance = "a:1"
    shared.start(None)
    try:
        link.down = True
        record = _record("completed")
        shared.changed(record)
        deadline = time.monotonic() + 5
        while shared.failed == 0:
            assert time.monotonic() < deadline, "the write was never tried"
            gevent.sleep(0.01)
        assert shared.stats()["unwritten"] == 1 and "troupe:task:r1" not in link.client.hashes
        link.down = False
        while shared.stats()["unwritten"]:
            assert time.monotonic() < deadline, "the refused write was never written"
            gevent.sleep(0.01)
        assert link.client.hashes["troupe:task:r1"]["status"] == b"completed"
    finally:
        shared.stop()
