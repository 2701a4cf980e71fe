"""RedisTasks: a cluster's minted task records in Redis, so any instance answers for a task another
one runs; and the pure snapshot functions around it (no Redis needed to build or read one).

A snapshot is what an instance other than the runner needs to answer tasks/get: the record's
modern view (SEP-2663's DetailedTask under its sealed taskId), the instance running it and since
when that instance's keeper has been in the cluster (`since`: an instance restarted under the same
name has lost its tasks, and its heartbeat's `started` is then later), the owner and the server.
Each task is one hash, `<prefix>:task:<id>` with fields `status` and `doc`, written by one script
that refuses to overwrite a terminal status: a task another instance declared lost stays failed,
even if its runner was only slow to beat. Every method blocks its caller for one or a few
commands, bounded by the link's timeouts; none is called from the keeper's own turn.
"""
from __future__ import annotations

import time
from typing import Any

import orjson

from actors.cluster.link import RedisLink
from actors.protocol import jsonrpc
from actors.tasks import wire

# A finished task's key outlives the time its result is kept by this much (clocks and sweeps differ).
EXPIRY_MARGIN_S = 60.0
_TERMINAL_LUA = " or ".join(f"s == '{state}'" for state in sorted(wire.TERMINAL))
# KEYS[1] the task; ARGV status, doc, ttl in ms. 1 written, 0 refused (already terminal).
PUT_SCRIPT = f"""
local s = redis.call('HGET', KEYS[1], 'status')
if {_TERMINAL_LUA} then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'doc', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""


# ---------------------------------------------------------------- snapshots (pure)


def snapshot(view: dict, instance: str, since: float, owner: str, server: str, created: float) -> dict:
    """A minted task's record as other instances read it."""
    return {"task": view, "instance": instance, "since": since, "owner": owner, "server": server,
            "created": created}


def encode(snap: dict) -> bytes:
    return orjson.dumps(snap)


def decode(raw: Any) -> dict | None:
    """A stored snapshot, checked field by field (Redis is shared: a damaged or foreign value is
    no task); None when it is not one."""
    try:
        doc = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        return None
    if not isinstance(doc, dict):
        return None
    task = wire.checked(doc.get("task"))
    instance, owner, server = doc.get("instance"), doc.get("owner"), doc.get("server")
    since, created = _seconds(doc.get("since")), _seconds(doc.get("created"))
    if isinstance(task, str) or not isinstance(instance, str) or not isinstance(owner, str) \
            or not isinstance(server, str) or since is None or created is None:
        return None
    return snapshot(task, instance, since, owner, server, created)


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def terminal(snap: dict) -> bool:
    return snap["task"]["status"] in wire.TERMINAL


def ttl_ms(snap: dict, live_s: float) -> int:
    """How long its key lives: a running task's as long as its id opens (`live_s`), a finished
    one's as long as its result is kept (its ttlMs) and a margin."""
    if not terminal(snap):
        return int(live_s * 1000)
    kept = snap["task"].get("ttlMs")
    created_ms = snap["created"] * 1000
    left = (created_ms + kept - time.time() * 1000) if isinstance(kept, int) else 0
    return max(1, int(left + EXPIRY_MARGIN_S * 1000))


def lost_message(instance: str) -> str:
    return f"troupe instance {instance} that ran this task stopped; its result is lost"


def lost(snap: dict, keep_s: float, now: float | None = None) -> dict:
    """`snap` as a task whose runner died: failed, with an error saying so, kept for `keep_s`."""
    now = time.time() if now is None else now
    task = {k: v for k, v in snap["task"].items() if k not in ("result", "inputRequests", "statusMessage")}
    task.update(status="failed", lastUpdatedAt=wire.now_iso(),
                ttlMs=int((now - snap["created"] + keep_s) * 1000),
                error={"code": jsonrpc.INTERNAL_ERROR, "message": lost_message(snap["instance"])})
    return {**snap, "task": task}


def alive(snap: dict, heartbeat: dict | None) -> bool:
    """Whether the instance that ran `snap` still does: its heartbeat is there (within a lease)
    and belongs to the run that wrote the snapshot (started no later than its keeper joined)."""
    if heartbeat is None:
        return False
    started = heartbeat.get("started")
    return not isinstance(started, (int, float)) or started <= snap["since"]


# ---------------------------------------------------------------- Redis I/O


class RedisTasks:
    """The task hashes of one cluster, through its RedisLink (whose prefix names the cluster).
    Every method may raise LinkDown; the caller decides what a missing answer means."""

    def __init__(self, link: RedisLink, prefix: str = "task") -> None:
        self.link, self.prefix = link, prefix

    def key(self, task: str) -> str:
        """The hash of the task troupe knows as `task` (the record id its sealed id carries)."""
        return self.link.key(self.prefix, task)

    def put_many(self, rows: list[tuple[str, str, bytes, int]]) -> list[bool]:
        """Write (task, status, doc, ttl ms) rows in one round trip, in order; True for each
        written, False for each refused because its task is already terminal in Redis."""
        def run(r) -> list:
            pipe = r.pipeline(transaction=False)
            for task, status, doc, ttl in rows:
                pipe.eval(PUT_SCRIPT, 1, self.key(task), status, doc, max(1, ttl))
            return pipe.execute()
        return [bool(v) for v in self.link.run(run)] if rows else []

    def put(self, task: str, snap: dict, live_s: float) -> bool:
        return self.put_many([(task, snap["task"]["status"], encode(snap), ttl_ms(snap, live_s))])[0]

    def get(self, task: str) -> dict | None:
        raw = self.link.run(lambda r: r.hget(self.key(task), "doc"))
        return decode(raw) if raw else None

    def delete(self, task: str) -> None:
        self.link.run(lambda r: r.delete(self.key(task)))

    def heartbeat(self, instance: str) -> dict | None:
        """The live entry of `instance` (actors/cluster/instances.py), or None: it is gone."""
        raw = self.link.run(lambda r: r.get(self.link.key("instance", instance)))
        try:
            entry = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            return {}  # there, if unreadable: alive as far as anyone can tell
        return entry if isinstance(entry, dict) else None
