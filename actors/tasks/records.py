"""The TaskKeeper's records: one per task troupe handed out, and the table that bounds them.

A record holds what troupe serves about a task: for one it minted, everything (status, result or
error, the server's open questions); for one a server runs, what troupe last saw of it (its status,
for /status and the per-client cap, and whose it is, for tasks/list). Results are kept for the
task's TTL after it finished and within a byte budget; the oldest finished go first.
"""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Iterator

import orjson

from actors.tasks import wire


class Record:
    """One task (see the module's docstring). `local` is troupe's key for it: the upstream call's
    origin_request for a minted task, the sealed id for a relayed one. `questions` maps an
    inputRequests key to the server's open question (a ServerRequest, or an MRTR input request
    of a modern server's round, with `round` its requestState). A record not yet `issued` is a
    call still within mint_after: no client holds its id yet."""

    __slots__ = ("local", "task_id", "server", "form", "owner", "cap_key", "minted", "issued", "status",
                 "status_message", "created", "created_iso", "updated_iso", "finished", "ttl_ms", "poll_ms",
                 "result", "error", "questions", "round", "round_keys", "round_answers", "next_key", "params", "target",
                 "waiter", "origin", "legacy_client", "client_capabilities", "result_waiters", "size",
                 "upstream_id", "following", "polled", "mint_timer", "client", "log_level", "deadline",
                 "counted")

    def __init__(self, local: str, server: str, form: str, owner: str, cap_key: str, minted: bool) -> None:
        self.local, self.server, self.form, self.owner, self.cap_key = local, server, form, owner, cap_key
        self.minted = minted
        self.task_id = ""  # the sealed id, once issued
        self.upstream_id = ""  # the server's own id (relayed)
        self.issued = False
        self.status = "working"
        self.status_message: str | None = None
        self.created = time.time()
        self.created_iso = self.updated_iso = wire.now_iso()
        self.finished: float | None = None
        self.ttl_ms: int | None = None
        self.poll_ms: int | None = None
        self.result: dict | None = None
        self.error: dict | None = None
        self.questions: dict[str, Any] = {}
        self.round: Any = None  # a modern server's requestState for its open MRTR round
        self.round_keys: dict[str, str] = {}  # our key → the server's key in that round
        self.round_answers: dict[str, Any] = {}  # the server's key → the client's answer, until the round is whole
        self.polled = 0.0  # monotonic time a relayed task's server was last asked for it
        self.next_key = 1
        self.params: dict = {}
        self.target: Any = None
        self.waiter: Any = None  # on_reply of the tools/call still waiting for its first answer
        self.origin: Any = None  # the Session that created it (a legacy one hears its status changes)
        self.legacy_client = False
        self.client_capabilities: Any = None
        self.result_waiters: list = []  # tasks/result calls waiting for the end: (on_reply, origin, token)
        self.size = 0  # bytes of its kept result or error
        self.following = False  # a legacy server's tasks/result is open for its questions
        self.mint_timer: Any = None  # the Deadline that mints it after mint_after, until the call answers
        self.client: str | None = None  # its client's serve.clients name: a per-client upstream's token
        self.log_level: str | None = None  # the logLevel its modern call asked for, for each later round
        self.deadline: float | None = None  # monotonic: a minted task still running then fails (max_duration)
        self.counted = False  # counts against its client's live tasks (from add until it ends or goes)

    @property
    def terminal(self) -> bool:
        return self.status in wire.TERMINAL

    def key(self) -> str:
        """A fresh inputRequests key, never reused within this task (SEP-2663)."""
        key = f"q{self.next_key}"
        self.next_key += 1
        return key

    def touch(self, status: str | None = None, message: str | None = None) -> None:
        if status is not None:
            self.status = status
        if message is not None:
            self.status_message = message[:wire.MAX_STATUS_MESSAGE]
        self.updated_iso = wire.now_iso()
        if self.terminal and self.finished is None:
            self.finished = time.time()

    def view(self, keep_s: float) -> dict:
        """The task in the modern shape, under its sealed id; a finished task's ttlMs reaches
        `keep_s` past its end (it may change over a task's life, and a long task must not expire
        while it runs)."""
        out: dict = {"taskId": self.task_id, "status": self.status, "createdAt": self.created_iso,
                     "lastUpdatedAt": self.updated_iso}
        if self.minted:
            end = self.finished if self.finished is not None else time.time()
            out["ttlMs"] = int((end - self.created + keep_s) * 1000)
        else:
            out["ttlMs"] = self.ttl_ms
        if self.poll_ms is not None:
            out["pollIntervalMs"] = self.poll_ms
        if self.status_message:
            out["statusMessage"] = self.status_message
        if self.status == "completed" and self.result is not None:
            out["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            out["error"] = self.error
        elif self.status == "input_required":
            out["inputRequests"] = {key: _as_input_request(q) for key, q in self.questions.items()}
        return out

    def seen(self, task: dict) -> None:
        """A relayed task's state as its server just reported it (checked by wire.checked)."""
        if self.terminal:
            return  # terminal states never change
        self.status = task["status"]
        self.updated_iso = task.get("lastUpdatedAt") or wire.now_iso()
        self.ttl_ms = task.get("ttlMs", self.ttl_ms)
        self.poll_ms = task.get("pollIntervalMs", self.poll_ms)
        if "statusMessage" in task:
            self.status_message = task["statusMessage"]
        if self.terminal and self.finished is None:
            self.finished = time.time()


def _as_input_request(question: Any) -> dict:
    """An open question as an inputRequests entry: {method, params}."""
    if isinstance(question, dict):
        params = question.get("params")
        return {**question, "params": wire.unrelated(params)} if isinstance(params, dict) else question
    return {"method": question.method, "params": wire.unrelated(question.params) if isinstance(question.params, dict)
            else {}}


class Records:
    """Every task record, by local key and by sealed id; live tasks counted per cap key; results
    bounded in bytes. Used only from the TaskKeeper's greenlet."""

    def __init__(self, keep_s: float, max_bytes: int, max_age_s: float) -> None:
        self.keep_s, self.max_bytes = keep_s, max_bytes
        self.max_age_s = max_age_s  # a relayed task whose server gave no TTL is forgotten after this
        self._by_local: dict[str, Record] = {}
        self._by_id: dict[str, Record] = {}
        self.live: Counter = Counter()  # cap key → unfinished tasks (and calls that may become one)
        self.bytes = 0
        self.bytes_by: Counter = Counter()  # cap key → bytes of its kept results: who pays when over budget
        self.created = Counter()  # "minted" / "relayed" → tasks handed out since start
        self.dropped = 0  # finished tasks dropped before their TTL to stay within max_bytes
        self.refused_at_cap = 0  # task-capable calls refused: their client held max_per_client live tasks

    def add(self, record: Record) -> None:
        self._by_local[record.local] = record
        self.live[record.cap_key] += 1
        record.counted = True

    def issue(self, record: Record, task_id: str) -> None:
        record.task_id, record.issued = task_id, True
        self._by_id[task_id] = record
        self.created["minted" if record.minted else "relayed"] += 1

    def local(self, local: str) -> Record | None:
        return self._by_local.get(local)

    def by_id(self, task_id: str) -> Record | None:
        return self._by_id.get(task_id)

    def forget(self, record: Record) -> None:
        """A call that ended before it became a task, or a task past its time."""
        if self._by_local.pop(record.local, None) is None:
            return
        self._by_id.pop(record.task_id, None)
        self._uncount(record)
        self.bytes -= record.size
        if record.size:
            self.bytes_by[record.cap_key] -= record.size
            if self.bytes_by[record.cap_key] <= 0:
                del self.bytes_by[record.cap_key]
        record.size = 0

    def finished(self, record: Record) -> None:
        """`record` just reached a terminal state: it no longer counts as live; its result's bytes
        count against max_bytes (the oldest finished records dropped to make room). Once per
        record: a second call (a late answer racing its cancel) changes nothing."""
        if not record.counted or record.local not in self._by_local:
            return
        self._uncount(record)
        kept = record.result if record.result is not None else record.error
        record.size = len(orjson.dumps(kept)) if kept is not None else 0
        self.bytes += record.size
        if record.size:
            self.bytes_by[record.cap_key] += record.size
        while self.bytes > self.max_bytes:
            old = self._evictable(record)
            if old is None:
                break
            self.forget(old)
            self.dropped += 1

    def _evictable(self, keep: Record) -> Record | None:
        """The finished record to drop first when results are over budget: the oldest of the client
        holding the most bytes (one client's flood of results evicts its own first, not others'),
        else the oldest of anyone's. Never `keep`, which just finished."""
        heaviest = max(self.bytes_by.items(), key=lambda kv: kv[1])[0] if self.bytes_by else None
        oldest = None
        for r in self._by_local.values():  # in creation order: the first found is about the oldest
            if r is keep or not r.terminal or not r.size:
                continue
            if r.cap_key == heaviest:
                return r
            if oldest is None:
                oldest = r
        return oldest

    def _uncount(self, record: Record) -> None:
        if not record.counted:
            return
        record.counted = False
        self.live[record.cap_key] -= 1
        if self.live[record.cap_key] <= 0:
            del self.live[record.cap_key]

    def expired(self, now: float) -> list[Record]:
        """Finished records past their TTL, and relayed ones whose server's TTL (or troupe's, when
        it gave none) ran out unseen."""
        out = []
        for record in self._by_local.values():
            if record.terminal and record.finished is not None and now - record.finished > self.keep_s:
                out.append(record)
            elif not record.minted and record.issued:
                # a server's TTL, at most troupe's own: a huge (or absent) one keeps no record forever
                ttl = min(record.ttl_ms / 1000, self.max_age_s) if record.ttl_ms is not None else self.max_age_s
                if now - record.created > ttl + self.keep_s:
                    out.append(record)
        return out

    def owned(self, owner: str) -> Iterator[Record]:
        """An owner's issued tasks, oldest first."""
        return (r for r in self._by_id.values() if r.owner == owner)

    def all(self) -> Iterator[Record]:
        return iter(list(self._by_local.values()))

    def stats(self) -> dict:
        """The figures /status, `troupe status`, the dashboard and /metrics show: tasks held now by
        state (in all and by kind: minted by troupe or relayed from a server), created since start,
        result bytes kept, finished tasks dropped for bytes, calls refused at the per-client cap."""
        by_kind: dict[str, Counter] = {"minted": Counter(), "relayed": Counter()}
        for record in self._by_id.values():
            by_kind["minted" if record.minted else "relayed"][record.status] += 1
        return {"by_state": {state: sum(c[state] for c in by_kind.values()) for state in wire.STATES},
                "by_kind_state": {kind: {state: c[state] for state in wire.STATES} for kind, c in by_kind.items()},
                "held": {kind: sum(c.values()) for kind, c in by_kind.items()},
                "created": {"minted": self.created.get("minted", 0), "relayed": self.created.get("relayed", 0)},
                "result_bytes": self.bytes, "dropped_for_bytes": self.dropped, "refused_at_cap": self.refused_at_cap}
