"""TaskKeeper actor: the one owner of every task troupe hands its clients.

A task-capable client's tools/call comes here from its Session (TaskCall) and goes on to the
server's Connection with the keeper as its origin, so whatever the server does next reaches the
keeper: its answer, its questions (ServerRequest), its own task. The keeper answers the Session's
call once, with the server's task under a sealed id (relayed), the plain result when it came
first, or a task of its own (minted) when there was none within mint_after. The call itself then
belongs to the keeper, not to the Session: it outlives the request that started it and the
client's session, until its result has been kept for the TTL.

Every later request for a task (TaskOp: tasks/get, update, cancel, result, list) comes here too.
For a minted task the keeper answers from its record (held.py); for a task a server runs, it
asks that server (relayed.py) and keeps what it saw (status for /status and the per-client cap).
A legacy (2025-11-25) server's task is followed: its tasks/result is kept open, so its questions
and its result reach the keeper as they happen and a modern client polling it sees them. The
calls themselves are task_calls.py; the servers' questions, questions.py; in a cluster, minted
tasks are kept in Redis too (clustered.py).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import gevent
import orjson
import pykka
from loguru import logger

from actors.messages import CancelForward, ServerRequest, ServerRequestCancelled, UpstreamError
from actors.protocol import jsonrpc
from actors.settings.model import TasksConfig
from actors.tasks import wire
from actors.tasks.held import HeldTasks, result_of
from actors.tasks.ids import TaskIds
from actors.tasks.messages import (
    GetTaskStats,
    MintDue,
    QuestionAnswered,
    TaskCall,
    TaskChanged,
    TaskOp,
    Tick,
    UnwatchTasks,
    UpstreamAnswered,
    WatchTasks,
    deliver,
)
from actors.tasks.questions import Questions
from actors.tasks.records import Record, Records
from actors.tasks.relayed import Relaying
from actors.tasks.session_side import SESSION_OWNER
from actors.tasks.task_calls import TaskCalls
from actors.tells import tell, unread_tells

if TYPE_CHECKING:
    from actors.tasks.clustered import SharedTasks

SWEEP_S = 5.0  # how often finished tasks past their TTL are dropped
POLL_TICK_S = 0.5  # how often watched tasks of modern servers are looked at


class TaskKeeper(pykka.ThreadingActor):
    """Owns every task record (records.Records) and every upstream call a task runs on (see the
    module's docstring). Receives TaskCall and TaskOp (from Sessions, each answered once through
    its on_reply), CancelForward (a Session's call withdrawn before it became a task, or a
    Session gone), WatchTasks and UnwatchTasks, ServerRequest and ServerRequestCancelled (a
    server's questions inside a task), GetTaskStats; and its own UpstreamAnswered, MintDue,
    QuestionAnswered and Tick. Sends Forward and CancelForward to Connections, TaskChanged and
    ServerRequest (a question for a legacy client waiting on tasks/result) to Sessions. The parts
    it is made of (calls, questions, held, relaying, shared) are plain objects used only from its
    greenlet."""

    def __init__(self, config: TasksConfig, ids: TaskIds, shared: SharedTasks | None = None) -> None:
        super().__init__()
        self.config, self.ids = config, ids
        self.shared = shared  # a cluster's: minted tasks in Redis (clustered.py); None alone
        self.records = Records(config.ttl, config.max_bytes, config.max_duration)
        self.calls = TaskCalls(self)
        self.questions = Questions(self)
        self.held = HeldTasks(self)
        self.relaying = Relaying(self)
        self._watchers: dict[str, tuple[Any, set]] = {}  # session urn → (ref, task ids)
        self._watching: dict[str, set[str]] = {}  # task id → urns of the sessions watching it
        self._clock: gevent.Greenlet | None = None
        self._last_sweep = time.monotonic()

    # ---------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        me = self.actor_ref

        def clock() -> None:
            while tell(me, Tick()):
                gevent.sleep(POLL_TICK_S)
        self._clock = gevent.spawn(clock)
        if self.shared is not None:
            self.shared.start(me)

    def on_stop(self) -> None:
        if self._clock is not None:
            self._clock.kill(block=False)
        why = "troupe is stopping"
        stopping = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why, server="troupe")
        for message in unread_tells(self):  # owed their answer like any other
            if isinstance(message, (TaskCall, TaskOp)):
                deliver(message.on_reply, stopping)
            elif isinstance(message, ServerRequest):
                message.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"troupe refuses {message.method}: {why}"))
        for record in self.records.all():
            waiter, record.waiter = record.waiter, None
            deliver(waiter, stopping)
            self._end_waiters(record, stopping)
            for question in record.questions.values():  # the servers' open questions get their answer too
                if isinstance(question, ServerRequest):
                    question.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST,
                                                    f"troupe refuses {question.method}: {why}"))
            record.questions.clear()
        self.relaying.stop(why)
        if self.shared is not None:
            self.shared.stop()

    def on_failure(self, exc_type, exc_value, traceback) -> None:
        logger.error("task keeper failed: {}: {}", exc_type.__name__ if exc_type else "?", exc_value)
        self.on_stop()

    def on_receive(self, message) -> None:
        try:
            self._dispatch(message)
        except Exception:  # one message's bug must not take every task down
            logger.exception("task keeper: handling {} failed", type(message).__name__)
            if isinstance(message, (TaskCall, TaskOp)):
                deliver(message.on_reply, UpstreamError(jsonrpc.INTERNAL_ERROR,
                                                        "troupe internal error in its task keeper", server="troupe"))

    def _dispatch(self, message) -> None:
        match message:
            case TaskCall():
                self._call(message)
            case TaskOp():
                self._op(message)
            case UpstreamAnswered():
                self.calls.answered(message)
            case MintDue(local=local):
                self.calls.due(local)
            case ServerRequest():
                self.questions.asked(message)
            case ServerRequestCancelled():
                self.questions.withdrawn(message)
            case QuestionAnswered():
                self.questions.answered(message)
            case CancelForward():
                self._withdrawn(message)
            case WatchTasks(session=session, task_ids=task_ids):
                self._watch(session, task_ids)
            case UnwatchTasks(session=session):
                self._unwatch(session.actor_urn)
            case GetTaskStats(future=future):
                future.set(self.stats())
            case Tick():
                self._tick()
            case _:
                if self.shared is None or not self.shared.dispatch(message):
                    self.relaying.dispatch(message)

    # ---------------------------------------------------------------- a client's requests

    def _call(self, call: TaskCall) -> None:
        """A task-capable client's tools/call: refused at the client's cap before anything runs."""
        live = self.records.live.get(call.cap_key, 0)
        if live >= self.config.max_per_client:
            self.records.refused_at_cap += 1
            deliver(call.on_reply, UpstreamError(
                jsonrpc.SERVER_UNAVAILABLE, f"too many live tasks: this client holds {live} "
                f"(serve.tasks.max_per_client is {self.config.max_per_client}); wait for one to finish or "
                "cancel one with tasks/cancel", {"liveTasks": live, "limit": self.config.max_per_client},
                server="troupe"))
            return
        self.calls.start(call)

    def _op(self, op: TaskOp) -> None:
        """tasks/*: a task this keeper holds whole (held), one a server runs (relaying), or, in a
        cluster, another instance's (shared)."""
        if op.method == "tasks/list":
            deliver(op.on_reply, self.held.listing(op))
            return
        assert op.ref is not None  # every other method names its task
        record = self.records.by_id(op.ref.task_id)
        if record is None and op.ref.minted:
            if self.shared is not None:  # cluster: another instance's, read from Redis
                self.shared.op(op)
                return
            deliver(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, "unknown task: no task of this client has "
                                               "that taskId (it may have expired)", server="troupe"))
            return
        if record is None or not record.minted:
            self.relaying.op(op, record)
            return
        self.held.op(op, record)

    def _withdrawn(self, cancel: CancelForward) -> None:
        """A Session withdrew its call (cancelled, deadline, gone) before the keeper answered it; a
        task already handed out lives on."""
        origin, token = cancel.origin, cancel.origin_request
        for record in self.records.all():
            if record.origin is not None and record.origin[0] == origin and token in (None, record.origin[1]):
                if record.waiter is not None:
                    self.calls.withdrawn(record, cancel.reason)
                elif token is not None and record.issued:
                    # The Session withdraws only a call it holds unanswered: the task's handle, on
                    # its way, is dropped there, and no client can ever reach this task.
                    self._orphaned(record, "its client's call ended before the task's id reached it")
                elif record.owner.startswith(SESSION_OWNER):
                    # an anonymous legacy session's task: only that session could reach it
                    self._orphaned(record, "the session that created it ended")
            record.result_waiters = [w for w in record.result_waiters
                                     if not (w[1] == origin and token in (None, w[2]))]
        self.relaying.withdrawn(origin, token)
        if token is None and origin is not None:
            self._unwatch(str(getattr(origin, "actor_urn", "")))

    def _orphaned(self, record: Record, why: str) -> None:
        """A task nobody can reach any more: cancelled (upstream too) and forgotten now."""
        if not record.terminal:
            if record.minted:
                self.calls.cancel(record, why)
            else:
                self.relaying.cancel_upstream(record)
                self.end(record, "cancelled", message=why)
        self._forget(record)

    # ---------------------------------------------------------------- a task's end, and who hears of it

    def end(self, record: Record, status: str, *, result: dict | None = None, error: dict | None = None,
            message: str | None = None) -> None:
        """`record` reaches terminal `status`: kept for the TTL, its waiters answered, its
        questions withdrawn, its watchers told. What it keeps is bounded and clean whoever ran the
        task: a result past max_result_bytes makes it failed, an error is an error object."""
        if result is not None:
            result = wire.unrelated(result)
            size, limit = len(orjson.dumps(result)), self.config.max_result_bytes
            if size > limit:
                status, result, error = "failed", None, {"code": jsonrpc.INTERNAL_ERROR, "message": (
                    f"the result of this task is {size} bytes, more than troupe keeps for a task "
                    f"(serve.tasks.max_result_bytes: {limit})")}
        if error is not None:
            error = wire.error_of(error) if isinstance(error, dict) else {
                "code": jsonrpc.INTERNAL_ERROR, "message": "the task failed"}
        record.result, record.error = result, error
        for question in record.questions.values():
            if isinstance(question, ServerRequest):
                question.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"the task is {status}"))
        record.questions.clear()
        record.touch(status, message)
        self.records.finished(record)
        self._end_waiters(record, result_of(record))
        self.changed(record)

    def _end_waiters(self, record: Record, outcome: Any) -> None:
        waiters, record.result_waiters = record.result_waiters, []
        for on_reply, _origin, _token in waiters:
            deliver(on_reply, outcome)

    def changed(self, record: Record) -> None:
        """Tell the task's watchers (and the legacy session that created it) its state now."""
        if not record.issued:
            return
        if self.shared is not None:
            self.shared.changed(record)
        view = None
        for urn in list(self._watching.get(record.task_id, ())):
            view = view or record.view(self.config.ttl)
            if not tell(self._watchers[urn][0], TaskChanged(record.task_id, view)):
                self._unwatch(urn)
        origin = record.origin[0] if record.origin else None
        if record.legacy_client and origin is not None:
            tell(origin, TaskChanged(record.task_id, view or record.view(self.config.ttl)))

    def watched(self, record: Record) -> bool:
        return record.task_id in self._watching

    def _watch(self, session, task_ids) -> None:
        urn = session.actor_urn
        _ref, ids = self._watchers.setdefault(urn, (session, set()))
        for task_id in task_ids:
            if task_id not in ids:
                ids.add(task_id)
                self._watching.setdefault(task_id, set()).add(urn)

    def _unwatch(self, urn: str) -> None:
        _ref, ids = self._watchers.pop(urn, (None, ()))
        for task_id in ids:
            self._unwatch_task(task_id, urn)

    def _unwatch_task(self, task_id: str, urn: str) -> None:
        urns = self._watching.get(task_id)
        if urns is not None:
            urns.discard(urn)
            if not urns:
                del self._watching[task_id]

    def _forget(self, record: Record) -> None:
        """A task past its time: no record, no watchers (their listens hear nothing more of it)."""
        self.records.forget(record)
        for urn in self._watching.pop(record.task_id, ()):
            watcher = self._watchers.get(urn)
            if watcher is not None:
                watcher[1].discard(record.task_id)

    # ---------------------------------------------------------------- the clock

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep >= SWEEP_S:
            self._last_sweep = now
            for record in self.records.expired(time.time()):
                # a tasks/result still waiting on a task past its time is answered now, not at its deadline
                self._end_waiters(record, UpstreamError(jsonrpc.INVALID_PARAMS, "unknown task: it expired",
                                                        server="troupe"))
                self._forget(record)
            self.calls.overdue(now)
        self.relaying.poll()

    def stats(self) -> dict:
        out = self.records.stats()
        out["live_by_client"] = len(self.records.live)
        out["max_per_client"] = self.config.max_per_client
        out["mint_after"] = self.config.mint_after
        if self.shared is not None:
            out["shared"] = self.shared.stats()
        return out
