"""Tasks a server runs, as the TaskKeeper relays them: the server's CreateTaskResult sealed, each
later request sent to the server under the server's own task id, and the answer turned back to
the client's id and era.

A modern (SEP-2663) server is asked when a client asks (and, for a task a listen stream follows
or a legacy client waits on with tasks/result, every poll interval). A legacy (2025-11-25) server
is followed instead: troupe keeps its tasks/result open from the task's creation, so the server's
questions (sent while that request is open) and its result reach the keeper as they happen and
clients of either era are served from the record (held.py). Used only from the
TaskKeeper's greenlet.
"""
from __future__ import annotations

import itertools
import time
import uuid
from typing import TYPE_CHECKING, Any

from loguru import logger

from actors.messages import NOT_A_CALLER, Forward, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.tasks import wire
from actors.tasks.held import responses_problem
from actors.tasks.messages import UpstreamAnswered, deliver
from actors.tasks.records import Record
from actors.tells import tell

if TYPE_CHECKING:
    from actors.tasks.keeper import TaskKeeper
    from actors.tasks.messages import TaskOp

MIN_POLL_S, MAX_POLL_S = 1.0, 10.0  # troupe's own polls of a server, whatever its pollIntervalMs says


class _OpReplied:
    """A server's answer to a request the keeper sent it for a relayed task."""

    __slots__ = ("op_id", "outcome")

    def __init__(self, op_id: str, outcome: Any) -> None:
        self.op_id, self.outcome = op_id, outcome


class _Pending:
    """A request sent to a server for a relayed task: what to do with its answer."""

    __slots__ = ("kind", "op", "record", "task_id", "form")

    def __init__(self, kind: str, op: TaskOp | None, record: Record | None, task_id: str, form: str) -> None:
        self.kind, self.op, self.record, self.task_id, self.form = kind, op, record, task_id, form


class Relaying:
    """The TaskKeeper's relayed tasks (see the module's docstring): its requests in flight to
    servers, by troupe's id for each."""

    def __init__(self, keeper: TaskKeeper) -> None:
        self.keeper = keeper
        self._pending: dict[str, _Pending] = {}
        self._polling: set[str] = set()  # task ids with a poll in flight: one at a time each
        self._ids = itertools.count(1)

    def dispatch(self, message) -> None:
        if isinstance(message, _OpReplied):
            self._replied(message)
        else:
            logger.warning("task keeper: unknown message {!r}", message)

    # ---------------------------------------------------------------- creation

    def created(self, record: Record, outcome: Any) -> None:
        """The server answered a task-capable client's tools/call: its task, or a plain result."""
        keeper = self.keeper
        waiter, record.waiter = record.waiter, None
        task = wire.task_of(outcome, record.form)
        if task is None and record.legacy_client and isinstance(outcome, dict) and \
                not modern.input_required(outcome):
            # A 2025-11-25 client asked for a task and was told it may: the server's plain result
            # becomes a task of troupe's, completed already, never a bare result it did not ask for.
            record.minted = True
            keeper.records.issue(record, keeper.ids.issue(record.server, record.local, record.owner, True))
            keeper.end(record, "completed", result=outcome)
            deliver(waiter, wire.created(record.view(keeper.config.ttl), True))
            return
        if task is None or isinstance(task, str):
            keeper.records.forget(record)
            if isinstance(task, str):
                logger.warning("server {} answered tools/call with a malformed task: {}", record.server, task)
                outcome = UpstreamError(jsonrpc.INTERNAL_ERROR, f"server {record.server} answered with a "
                                        f"malformed task: {task}", server=record.server)
            deliver(waiter, outcome)
            return
        record.upstream_id, record.created_iso = task["taskId"], task["createdAt"]
        record.seen(task)
        keeper.records.issue(record, keeper.ids.issue(record.server, record.upstream_id, record.owner, False,
                                                      record.form))
        if record.terminal:
            keeper.records.finished(record)
        deliver(waiter, wire.created(record.view(keeper.config.ttl), record.legacy_client))
        if record.form == wire.LEGACY and not record.terminal:
            self._follow(record)

    def _follow(self, record: Record) -> None:
        """Keep a legacy server's tasks/result open: its questions and its end come to the keeper."""
        me, local = self.keeper.actor_ref, record.local

        def on_reply(outcome) -> None:  # the connection's greenlet: a tell, nothing else
            tell(me, UpstreamAnswered(local, outcome, follow=True))
        record.following = True
        # the server's questions name the task (related-task): they reach this follow, its client's
        if not tell(record.target, Forward("tasks/result", {"taskId": record.upstream_id}, on_reply,
                                           timeout=self.keeper.config.max_duration, origin=me, origin_request=local,
                                           client_capabilities=record.client_capabilities, client=record.client,
                                           caller=("follows", record.upstream_id))):
            self.followed(record, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {record.server} went away",
                                                server=record.server))

    def followed(self, record: Record, outcome: Any) -> None:
        """A legacy server's tasks/result answered: the task's end (what the call would have returned)."""
        record.following = False
        if record.terminal:
            return
        if isinstance(outcome, UpstreamError):
            self.keeper.end(record, "failed", error=outcome.to_error())
        elif isinstance(outcome, dict):
            self.keeper.end(record, "completed", result=outcome)
        else:
            self.keeper.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR,
                                                     "message": f"server {record.server} answered tasks/result "
                                                     "with no result"})

    # ---------------------------------------------------------------- a client's requests

    def op(self, op: TaskOp, record: Record | None) -> None:
        """tasks/get, update, cancel or result of a task a server runs."""
        assert op.ref is not None
        keeper, ref = self.keeper, op.ref
        if record is not None and record.form == wire.LEGACY and op.method != "tasks/cancel":
            keeper.held.op(op, record)  # followed: the record has its questions and its end
            return
        if record is not None and op.target is not None:
            record.target = op.target  # the server's Connection now (a restarted one is a new actor)
        if op.target is None:
            deliver(op.on_reply, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {ref.server} is not running: "
                                              "its task cannot be reached now", server=ref.server))
            return
        if op.method == "tasks/result":
            if record is None:
                cap_key = op.ref.owner or "anonymous"
                if keeper.records.live.get(cap_key, 0) >= keeper.config.max_per_client:
                    keeper.records.refused_at_cap += 1
                    deliver(op.on_reply, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "too many live tasks: this "
                                                      "client's tasks/result waits fill serve.tasks.max_per_client",
                                                      server="troupe"))
                    return
                record = self._adopt(op, cap_key)
            if record.terminal:
                keeper.held.result_done(op.on_reply, record)
                return
            record.result_waiters.append((op.on_reply, op.origin, op.origin_request))
            record.polled = 0.0  # looked at on the next tick
            return
        if op.method == "tasks/update":
            if ref.form == wire.LEGACY:
                deliver(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, "this task's questions are not "
                                                  "held here: answer them on its tasks/result", server="troupe"))
                return
            problem = responses_problem(op.params.get("inputResponses"))
            if problem is not None:
                deliver(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, problem, server="troupe"))
                return
            params = {"taskId": ref.upstream_id, "inputResponses": op.params["inputResponses"]}
        else:
            params = {"taskId": ref.upstream_id}
        kind = op.method.split("/", 1)[1]
        if record is not None and op.method == "tasks/cancel" and record.form == wire.LEGACY and not record.terminal:
            # (ended once only: a finished task's end, result and count stay as they are)
            self.keeper.end(record, "cancelled", message="cancelled by its client")
        self._send(kind, op, record, ref.task_id, ref.form, op.target, op.method, params)

    def _adopt(self, op: TaskOp, cap_key: str) -> Record:
        """A record for a relayed task this keeper did not create (another instance did, or a
        troupe before a restart): a legacy client waits on it here. It counts against its
        client's cap and is forgotten like any relayed record (its server's TTL, at most troupe's)."""
        assert op.ref is not None
        record = Record(uuid.uuid4().hex, op.ref.server, op.ref.form, op.ref.owner, cap_key, minted=False)
        record.upstream_id, record.target, record.legacy_client = op.ref.upstream_id, op.target, op.legacy_client
        record.client = op.client
        self.keeper.records.add(record)
        self.keeper.records.issue(record, op.ref.task_id)
        return record

    def cancel_upstream(self, record: Record) -> None:
        """Cancel a relayed task at its server (nobody waits for the answer)."""
        if record.target is not None and record.upstream_id:
            self._send("cancel", None, record, record.task_id, record.form, record.target, "tasks/cancel",
                       {"taskId": record.upstream_id})

    def answer(self, record: Record, their_key: str, response: Any) -> None:
        """A legacy client answered a modern server's input request: the server hears it in tasks/update."""
        if isinstance(response, UpstreamError):
            return  # nothing to tell: the server asks again or times the request out
        self._send("answer", None, record, record.task_id, record.form, record.target, "tasks/update",
                   {"taskId": record.upstream_id, "inputResponses": {their_key: response}})

    def _send(self, kind: str, op: TaskOp | None, record: Record | None, task_id: str, form: str, target,
              method: str, params: dict) -> None:
        op_id = f"op{next(self._ids)}"
        self._pending[op_id] = _Pending(kind, op, record, task_id, form)
        me = self.keeper.actor_ref

        def on_reply(outcome) -> None:  # the connection's greenlet: a tell, nothing else
            tell(me, _OpReplied(op_id, outcome))
        caps = record.client_capabilities if record is not None else None
        client = op.client if op is not None else record.client if record is not None else None
        if kind == "poll":
            self._polling.add(task_id)
        # no question of the server's rides these (a poll, a get, a cancel): it reaches no client
        if not tell(target, Forward(method, params, on_reply, origin=me, origin_request=op_id,
                                    client_capabilities=caps, client=client, caller=NOT_A_CALLER)):
            self._replied(_OpReplied(op_id, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "the server went away",
                                                          link_lost=True)))

    def _replied(self, msg: _OpReplied) -> None:
        pending = self._pending.pop(msg.op_id, None)
        if pending is None:
            return  # its client withdrew it
        if pending.kind == "poll":
            self._polling.discard(pending.task_id)
        outcome, op, record, keeper = msg.outcome, pending.op, pending.record, self.keeper
        if pending.kind == "answer":
            return
        if pending.kind in ("get", "poll", "fetch") and not isinstance(outcome, UpstreamError):
            task = wire.checked(wire.from_legacy(outcome) if pending.form == wire.LEGACY and isinstance(outcome, dict)
                                else outcome)
            if isinstance(task, str):
                outcome = UpstreamError(jsonrpc.INTERNAL_ERROR, f"the server answered with a malformed task: {task}")
            else:
                task["taskId"] = pending.task_id
                if record is not None:
                    self._seen(record, task)
                if op is None:
                    return  # a poll of troupe's own
                outcome = wire.detailed(task, op.legacy_client)
        if pending.kind == "poll" or op is None:
            return
        if pending.kind == "cancel":
            if isinstance(outcome, UpstreamError):
                deliver(op.on_reply, outcome)
                return
            view = record.view(keeper.config.ttl) if record is not None else {
                "taskId": pending.task_id, "status": "cancelled", "createdAt": wire.now_iso(),
                "lastUpdatedAt": wire.now_iso(), "ttlMs": None}
            deliver(op.on_reply, wire.to_legacy({**view, "status": "cancelled"}) if op.legacy_client else {})
            return
        if pending.kind == "update" and isinstance(outcome, dict):
            outcome = {}
        deliver(op.on_reply, outcome)

    def _seen(self, record: Record, task: dict) -> None:
        """A modern server reported its task: kept, and a change told to whoever follows it."""
        before = (record.status, record.status_message)
        was_terminal = record.terminal
        record.seen(task)
        if record.status == "input_required" and isinstance(task.get("inputRequests"), dict):
            for key, request in task["inputRequests"].items():
                if key not in record.questions and key not in record.round_keys and isinstance(request, dict):
                    record.questions[key] = request
                    record.round_keys[key] = key  # asked: a later poll showing it again asks nobody twice
                    for waiter in record.result_waiters:
                        self.keeper.questions.ask_waiter(record, key, waiter)
        if record.terminal and not was_terminal:
            record.status = "working"  # keeper.end makes the change, with its result and waiters
            self.keeper.end(record, task["status"], result=task.get("result"), error=task.get("error"),
                            message=task.get("statusMessage"))
            return
        if (record.status, record.status_message) != before:
            self.keeper.changed(record)

    # ---------------------------------------------------------------- the clock, and leaving

    def poll(self) -> None:
        """Ask modern servers about the tasks someone follows (a listen stream, a tasks/result)."""
        now = time.monotonic()
        for record in self.keeper.records.all():
            if record.minted or record.form != wire.MODERN or record.terminal or not record.issued \
                    or record.target is None:
                continue
            if not record.result_waiters and not self.keeper.watched(record):
                continue
            interval = min(MAX_POLL_S, max(MIN_POLL_S, (record.poll_ms or 0) / 1000))
            if now - record.polled < interval or record.task_id in self._polling:
                continue
            record.polled = now
            self._send("poll", None, record, record.task_id, record.form, record.target, "tasks/get",
                       {"taskId": record.upstream_id})

    def withdrawn(self, origin, token) -> None:
        for op_id, pending in list(self._pending.items()):
            op = pending.op
            if op is not None and op.origin == origin and token in (None, op.origin_request):
                del self._pending[op_id]

    def stop(self, why: str) -> None:
        for pending in self._pending.values():
            if pending.op is not None:
                deliver(pending.op.on_reply, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why, server="troupe"))
        self._pending.clear()
        self._polling.clear()

