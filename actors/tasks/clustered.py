"""The TaskKeeper's side of a cluster: its minted tasks written to Redis as they change, and the
tasks/* requests for a minted task this instance does not hold answered from there.

Writes leave the keeper's turn at once: the snapshot is encoded there (immutable bytes) and put
on an outbox that one writer greenlet drains in order, a pipeline per batch, so a slow Redis
delays the writes, never the keeper. Creation is the exception the SEP asks for (tasks/get must
resolve once CreateTaskResult is sent): the client's task id is held back until its first write
is done, for at most CREATE_WAIT_S; with Redis down (or slower than that) the task is handed out
anyway, with a warning, and works on this instance: a task troupe could run is not refused
because the others may not see it. A request for a task another instance runs is answered from a
greenlet of its own: tasks/get from the snapshot while that instance is alive, as `failed` (and
written back) once its heartbeat is gone. tasks/update and tasks/cancel of a task another live
instance runs are refused (-32602) saying which instance: troupe does not forward them.
"""
from __future__ import annotations

import time
from typing import Any

import gevent
import gevent.pool
import gevent.queue
from loguru import logger

from actors.cluster.link import LinkDown
from actors.messages import UpstreamError
from actors.protocol import jsonrpc
from actors.tasks import shared_store as snaps
from actors.tasks import wire
from actors.tasks.messages import TaskOp, TasksJoined, deliver
from actors.tasks.records import Record
from actors.tasks.shared_store import RedisTasks
from actors.tells import tell

CREATE_WAIT_S = 1.0  # a new task's id waits this long at most for Redis (the Session's margin is 2 s)
OUTBOX_SIZE = 10_000  # writes waiting for a slow Redis; past this they are dropped, counted
BATCH = 100  # writes per pipeline
RETRY_S = 1.0  # a write Redis refused is tried again this often
REMOTE_OPS = 256  # requests for other instances' tasks answered at once (each a greenlet waiting on Redis)
RESULT_POLL_S = 1.0  # a 2025-11-25 tasks/result for another instance's task looks again this often


class _Write:
    """One snapshot on its way to Redis; `notify`: tell the keeper once it is written (creation)."""

    __slots__ = ("task", "status", "doc", "ttl_ms", "notify")

    def __init__(self, task: str, status: str, doc: bytes, ttl_ms: int, notify: bool) -> None:
        self.task, self.status, self.doc, self.ttl_ms, self.notify = task, status, doc, ttl_ms, notify


class _Stored:
    """Told by the writer: these tasks' first snapshots are in Redis (or failed to get there)."""

    __slots__ = ("tasks",)

    def __init__(self, tasks: tuple) -> None:
        self.tasks = tasks


class _CreateLate:
    """CREATE_WAIT_S passed for a new task's first write: its client is answered anyway."""

    __slots__ = ("task",)

    def __init__(self, task: str) -> None:
        self.task = task


class SharedTasks:
    """Owned by one TaskKeeper and used from its greenlet only (its writer and request greenlets
    get immutable arguments and answer by tells). Holds the instance name (TasksJoined), the
    creation replies waiting for their write, the outbox and its counts."""

    def __init__(self, store: RedisTasks, keep_s: float, live_s: float) -> None:
        self.store, self.keep_s, self.live_s = store, keep_s, live_s
        self.instance: str | None = None
        self.since = 0.0
        self._me: Any = None
        self._waiting: dict[str, tuple[Any, dict]] = {}  # task (record id) → (on_reply, CreateTaskResult)
        self._outbox: gevent.queue.Queue = gevent.queue.Queue(OUTBOX_SIZE)
        self._greenlets: list[gevent.Greenlet] = []
        self._remote = gevent.pool.Pool(REMOTE_OPS)
        self._unwritten: dict[str, _Write] = {}  # task → its newest write Redis refused (writer greenlet's own)
        self.written = self.dropped = self.failed = 0

    def start(self, me) -> None:
        self._me = me
        self._greenlets.append(gevent.spawn(self._write_loop))

    def stop(self) -> None:
        for on_reply, reply in self._waiting.values():  # owed their task ids: the others answer them as lost
            deliver(on_reply, reply)
        self._waiting.clear()
        gevent.killall(self._greenlets, block=False)
        self._remote.kill(block=False)

    def dispatch(self, message) -> bool:
        """Handle one of this side's messages; False for any other."""
        match message:
            case TasksJoined(instance=instance):
                self.instance, self.since = instance, time.time()
            case _Stored(tasks=tasks):
                for task in tasks:
                    self._answer(task)
            case _CreateLate(task=task):
                if task in self._waiting:
                    logger.warning("task {}: handed out before Redis stored it; other instances may not "
                                   "know it yet", task)
                    self._answer(task)
            case _:
                return False
        return True

    def _answer(self, task: str) -> None:
        waiting = self._waiting.pop(task, None)
        if waiting is not None:
            deliver(*waiting)

    # ---------------------------------------------------------------- writes

    def minted(self, record: Record, on_reply, reply: dict) -> bool:
        """`record` just became a task: written, and its CreateTaskResult (`reply`, to `on_reply`)
        sent once it is. False when the keeper should answer at once (not joined, Redis down)."""
        if not self._put(record, notify=on_reply is not None) or on_reply is None:
            return False
        if self.store.link.failed:  # known down: not worth holding the client
            logger.warning("task {}: Redis is down; other instances will not know this task", record.local)
            return False
        self._waiting[record.local] = (on_reply, reply)
        me, task = self._me, record.local
        gevent.spawn_later(CREATE_WAIT_S, tell, me, _CreateLate(task))
        return True

    def changed(self, record: Record) -> None:
        """A minted task's state changed: its snapshot goes to Redis (fire and forget, in order)."""
        if record.minted and record.issued:
            self._put(record, notify=False)

    def _put(self, record: Record, notify: bool) -> bool:
        if self.instance is None:
            return False  # not in the cluster yet (troupe has no address): nothing the others could use
        snap = snaps.snapshot(record.view(self.keep_s), self.instance, self.since, record.owner, record.server,
                              record.created)
        write = _Write(record.local, record.status, snaps.encode(snap), snaps.ttl_ms(snap, self.live_s), notify)
        try:
            self._outbox.put_nowait(write)
        except gevent.queue.Full:
            self.dropped += 1
            return False
        return True

    def _write_loop(self) -> None:
        """Drain the outbox in order. A write Redis did not take is kept (the newest per task) and
        tried again every RETRY_S until it is: a task's last change (its end) has no later one to
        write it again, and must not stay `working` in Redis."""
        while True:
            batch = []
            if self._unwritten:
                try:
                    batch.append(self._outbox.get(timeout=RETRY_S))
                except gevent.queue.Empty:
                    pass
                if not self.store.link.failed or not batch:
                    batch[:0], self._unwritten = list(self._unwritten.values()), {}  # older first: newer win
            else:
                batch.append(self._outbox.get())
            while len(batch) < BATCH and not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            try:
                self.store.put_many([(w.task, w.status, w.doc, w.ttl_ms) for w in batch])
                self.written += len(batch)
            except LinkDown:
                self.failed += len(batch)  # the link logged why; tried again in RETRY_S
                for w in batch:
                    self._unwritten[w.task] = w
            done = tuple(w.task for w in batch if w.notify)
            if done:
                tell(self._me, _Stored(done))

    # ---------------------------------------------------------------- another instance's task

    def op(self, op: TaskOp) -> None:
        """tasks/get, update, cancel or result of a minted task this keeper does not hold: each in
        a greenlet of the bounded pool (a tasks/result there may wait for the task's end)."""
        if self._remote.full():
            deliver(op.on_reply, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"troupe already waits on {REMOTE_OPS} "
                                              "requests for tasks other instances run; try again shortly",
                                              server="troupe"))
            return
        self._remote.spawn(remote_op, self.store, op, self.keep_s, self.live_s)

    def stats(self) -> dict:
        return {"instance": self.instance, "written": self.written, "write_failures": self.failed,
                "dropped": self.dropped, "outbox": self._outbox.qsize(), "unwritten": len(self._unwritten)}


def remote_op(store: RedisTasks, op: TaskOp, keep_s: float, live_s: float) -> None:
    """Answer `op` from Redis (a greenlet of its own: it waits on Redis, and for tasks/result on
    the task's end)."""
    assert op.ref is not None  # only ops naming a task come here
    try:
        snap = _current(store, op, keep_s, live_s)
        if snap is not None and op.method == "tasks/result":
            deadline = time.monotonic() + snaps.ttl_ms(snap, live_s) / 1000
            while not snaps.terminal(snap) and time.monotonic() < deadline:
                gevent.sleep(RESULT_POLL_S)
                snap = _current(store, op, keep_s, live_s) or snap
    except LinkDown as exc:
        deliver(op.on_reply, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "this task is run by another troupe "
                                          f"instance and Redis, where it is kept, is down ({exc})", server="troupe"))
        return
    if snap is None:
        deliver(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, "unknown task: no task of this client has "
                                          "that taskId (it may have expired)", server="troupe"))
        return
    deliver(op.on_reply, answer(op, snap))


def _current(store: RedisTasks, op: TaskOp, keep_s: float, live_s: float) -> dict | None:
    """The task's snapshot now; a running one whose instance is gone becomes failed (written back
    unless another instance got there first, whose verdict is then read)."""
    assert op.ref is not None
    snap = store.get(op.ref.upstream_id)
    if snap is None or snap["task"]["taskId"] != op.ref.task_id or snap["owner"] != op.ref.owner:
        return None  # not this id's task (a damaged or foreign value)
    if snaps.terminal(snap) or snaps.alive(snap, store.heartbeat(snap["instance"])):
        return snap
    failed = snaps.lost(snap, keep_s)
    if store.put(op.ref.upstream_id, failed, live_s):
        logger.info("task {}: troupe instance {} that ran it is gone; the task failed",
                    op.ref.upstream_id, snap["instance"])
        return failed
    return store.get(op.ref.upstream_id) or failed


def answer(op: TaskOp, snap: dict) -> Any:
    """What `op` is answered with for the task in `snap` (the same shapes as a local one's)."""
    task, legacy = snap["task"], op.legacy_client
    if op.method == "tasks/get":
        return wire.detailed(task, legacy)
    if op.method == "tasks/result":
        if task["status"] == "completed" and isinstance(task.get("result"), dict):
            result = dict(task["result"])
            result["_meta"] = {**(result.get("_meta") or {}), **wire.related(task["taskId"])}
            return result
        error = task.get("error") if isinstance(task.get("error"), dict) else {}
        return UpstreamError(error.get("code", jsonrpc.INTERNAL_ERROR) if isinstance(error.get("code"), int)
                             else jsonrpc.INTERNAL_ERROR, str(error.get("message") or f"the task is {task['status']}"),
                             error.get("data"), server=snap["server"])
    if op.method in ("tasks/cancel", "tasks/update"):
        if snaps.terminal(snap):  # as for a local task: nothing left to cancel or answer
            if legacy and op.method == "tasks/cancel":  # (2025-11-25 refuses a finished task's cancel)
                return UpstreamError(jsonrpc.INVALID_PARAMS, f"the task is already {task['status']}: there is "
                                     "nothing to cancel", server="troupe")
            return {}
        return UpstreamError(jsonrpc.INVALID_PARAMS, f"this task is run by troupe instance {snap['instance']}; "
                             f"{op.method} must be sent to that instance (troupe does not forward it)",
                             {"instance": snap["instance"]}, server="troupe")
    return UpstreamError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {op.method}")

