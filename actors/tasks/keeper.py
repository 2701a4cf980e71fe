"""TaskKeeper actor: the one owner of every task troupe hands its clients.

A task-capable client's tools/call comes here from its Session (TaskCall) and goes on to the
server's Connection with the keeper as its origin, so whatever the server does next reaches the
keeper: its answer, its questions (ServerRequest), its own task. The keeper answers the Session's
call once, with the server's task under a sealed id (relayed), the plain result when it came
first, or a task of its own (minted) when there was none within mint_after. The call itself then
belongs to the keeper, not to the Session: it outlives the request that started it and the
client's session, until its result has been kept for the TTL.

Every later request for a task (TaskOp: tasks/get, update, cancel, result, list) comes here too.
For a minted task the keeper answers from its record; for a task a server runs, it asks that
server (relayed.py) and keeps what it saw (status for /status and the per-client cap). A legacy
(2025-11-25) server's task is followed: its tasks/result is kept open, so its questions and its
result reach the keeper as they happen and a modern client polling it sees them.
"""
from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import gevent
import orjson
import pykka
from loguru import logger

from actors.downstream.client_requests import NEEDS
from actors.messages import CancelForward, Forward, ServerRequest, ServerRequestCancelled, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.settings.model import TasksConfig
from actors.tasks import wire
from actors.tasks.ids import TaskIds
from actors.tasks.messages import GetTaskStats, TaskCall, TaskChanged, TaskOp, UnwatchTasks, WatchTasks
from actors.tasks.records import Record, Records
from actors.tasks.relayed import Relaying
from actors.tells import tell, unread_tells

if TYPE_CHECKING:
    from actors.tasks.clustered import SharedTasks

SWEEP_S = 5.0  # how often finished tasks past their TTL are dropped
POLL_TICK_S = 0.5  # how often watched tasks of modern servers are looked at
LIST_PAGE = 100  # 2025-11-25 tasks/list: tasks per page


class _Upstream:
    """The server's answer to a task's tools/call (or to a legacy server's tasks/result)."""

    __slots__ = ("local", "outcome", "follow")

    def __init__(self, local: str, outcome: Any, follow: bool = False) -> None:
        self.local, self.outcome, self.follow = local, outcome, follow


class _MintNow:
    """mint_after passed for a call still without an answer."""

    __slots__ = ("local",)

    def __init__(self, local: str) -> None:
        self.local = local


class _Answer:
    """A legacy client answered a question of a task it waits on with tasks/result."""

    __slots__ = ("local", "key", "outcome")

    def __init__(self, local: str, key: str, outcome: Any) -> None:
        self.local, self.key, self.outcome = local, key, outcome


class _Tick:
    """The keeper's own clock: sweep expired tasks, poll watched ones."""


class TaskKeeper(pykka.ThreadingActor):
    """Owns every task record (records.Records) and every upstream call a task runs on (see the
    module's docstring). Receives TaskCall and TaskOp (from Sessions, each answered once through
    its on_reply), CancelForward (a Session's call withdrawn before it became a task, or a
    Session gone), WatchTasks and UnwatchTasks, ServerRequest and ServerRequestCancelled (a
    server's questions inside a task), GetTaskStats; and its own _Upstream, _MintNow, _Answer and
    _Tick. Sends Forward and CancelForward to Connections, TaskChanged and ServerRequest (a
    question for a legacy client waiting on tasks/result) to Sessions."""

    def __init__(self, config: TasksConfig, ids: TaskIds, shared: SharedTasks | None = None) -> None:
        super().__init__()
        self.config, self.ids = config, ids
        self.shared = shared  # a cluster's: minted tasks in Redis (clustered.py); None alone
        self.records = Records(config.ttl, config.max_bytes, config.max_duration)
        self.relaying = Relaying(self)
        self._watchers: dict[str, tuple[Any, set]] = {}  # session urn → (ref, task ids)
        self._clock: gevent.Greenlet | None = None
        self._last_sweep = time.monotonic()

    # ---------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        me = self.actor_ref

        def clock() -> None:
            while tell(me, _Tick()):
                gevent.sleep(POLL_TICK_S)
        self._clock = gevent.spawn(clock)
        if self.shared is not None:
            self.shared.start(me)

    def on_stop(self) -> None:
        if self._clock is not None:
            self._clock.kill(block=False)
        why = "troupe is stopping"
        for message in unread_tells(self):  # owed their answer like any other
            if isinstance(message, (TaskCall, TaskOp)):
                _reply(message.on_reply, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why, server="troupe"))
            elif isinstance(message, ServerRequest):
                message.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"troupe refuses {message.method}: {why}"))
        for record in self.records.all():
            if record.waiter is not None:
                _reply(record.waiter, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why, server="troupe"))
                record.waiter = None
            self._end_waiters(record, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why, server="troupe"))
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
            reply = getattr(message, "on_reply", None)
            if isinstance(message, (TaskCall, TaskOp)) and reply is not None:
                _reply(reply, UpstreamError(jsonrpc.INTERNAL_ERROR, "troupe internal error in its task keeper",
                                            server="troupe"))

    def _dispatch(self, message) -> None:
        match message:
            case TaskCall():
                self._call(message)
            case TaskOp():
                self._op(message)
            case _Upstream():
                self._upstream(message)
            case _MintNow(local=local):
                record = self.records.local(local)
                if record is not None and not record.issued and record.waiter is not None:
                    self._mint(record)
            case ServerRequest():
                self._question(message)
            case ServerRequestCancelled(server=server, upstream_id=uid):
                self._question_withdrawn(server, uid)
            case _Answer(local=local, key=key, outcome=outcome):
                record = self.records.local(local)
                if record is not None:
                    self.answer_question(record, key, outcome)
            case CancelForward():
                self._withdrawn(message)
            case WatchTasks(session=session, task_ids=task_ids):
                ref, ids = self._watchers.setdefault(session.actor_urn, (session, set()))
                ids.update(task_ids)
            case UnwatchTasks(session=session):
                self._watchers.pop(session.actor_urn, None)
            case GetTaskStats(future=future):
                future.set(self.stats())
            case _Tick():
                self._tick()
            case _:
                if self.shared is None or not self.shared.dispatch(message):
                    self.relaying.dispatch(message)

    # ---------------------------------------------------------------- a tools/call

    def _call(self, call: TaskCall) -> None:
        live = self.records.live.get(call.cap_key, 0)
        if live >= self.config.max_per_client:
            self.records.refused_at_cap += 1
            _reply(call.on_reply, UpstreamError(
                jsonrpc.SERVER_UNAVAILABLE, f"too many live tasks: this client holds {live} "
                f"(serve.tasks.max_per_client is {self.config.max_per_client}); wait for one to finish or "
                "cancel one with tasks/cancel", {"liveTasks": live, "limit": self.config.max_per_client},
                server="troupe"))
            return
        record = Record(uuid.uuid4().hex, call.server, call.form, call.owner, call.cap_key, minted=not call.form)
        record.target, record.waiter, record.origin = call.target, call.on_reply, (call.origin, call.origin_request)
        record.legacy_client, record.client_capabilities = call.legacy_client, call.client_capabilities
        record.params = call.params
        if record.minted:
            record.poll_ms = self.config.poll_interval_ms
        self.records.add(record)
        params = call.params
        if call.form == wire.LEGACY:  # the 2025-11-25 augmentation: the server creates the task
            params = {**params, "task": {"ttl": call.ttl_ms} if call.ttl_ms is not None else {}}
        self._send(record, params, call.max_duration if record.minted else None, call)
        if not record.minted:
            return
        mint_after = 0.0 if call.legacy_client else call.mint_after
        if mint_after is None or mint_after <= 0:
            if record.waiter is not None:  # not failed at once
                self._mint(record)
        else:
            me, local = self.actor_ref, record.local
            gevent.spawn_later(mint_after, lambda: tell(me, _MintNow(local)))

    def _send(self, record: Record, params: dict, timeout: float | None, call: TaskCall) -> None:
        me, local = self.actor_ref, record.local

        def on_reply(outcome) -> None:  # the connection's greenlet: a tell, nothing else
            tell(me, _Upstream(local, outcome))
        if not tell(record.target, Forward("tools/call", params, on_reply, timeout=timeout, origin=me,
                                           origin_request=local, client_capabilities=call.client_capabilities,
                                           log_level=call.log_level, client=call.client)):
            self._upstream(_Upstream(local, UpstreamError(jsonrpc.SERVER_UNAVAILABLE,
                                                          f"server {record.server} went away", server=record.server,
                                                          link_lost=True)))

    def _mint(self, record: Record) -> None:
        """The call becomes troupe's own task: its client is answered with the handle now."""
        self.records.issue(record, self.ids.issue(record.server, record.local, record.owner, True))
        waiter, record.waiter = record.waiter, None
        logger.debug("task {} minted around a call to {}", record.local, record.server)
        reply = wire.created(record.view(self.config.ttl), record.legacy_client)
        # cluster: the id goes out once Redis has the task (the shared side answers the waiter then)
        if self.shared is not None and self.shared.minted(record, waiter, reply):
            return
        if waiter is not None:
            _reply(waiter, reply)

    def _upstream(self, msg: _Upstream) -> None:
        record = self.records.local(msg.local)
        if record is None:
            return  # forgotten (cancelled before it became a task, or expired)
        if msg.follow:
            self.relaying.followed(record, msg.outcome)
            return
        if not record.minted:
            self.relaying.created(record, msg.outcome)
            return
        if not record.issued:
            if not modern.input_required(msg.outcome):  # answered within mint_after: no task at all
                waiter, record.waiter = record.waiter, None
                self.records.forget(record)
                if waiter is not None:
                    _reply(waiter, msg.outcome)
                return
            self._mint(record)  # a modern server's question inside the call: a task from here on
        self.finish_call(record, msg.outcome)

    def finish_call(self, record: Record, outcome: Any) -> None:
        """The upstream call of minted task `record` answered: its next input round, or its end."""
        if record.terminal:
            return  # cancelled meanwhile: what the server did late changes nothing
        if modern.input_required(outcome):
            self._round(record, outcome)
            return
        if isinstance(outcome, UpstreamError):
            self.end(record, "failed", error=outcome.to_error())
        elif isinstance(outcome, dict):
            size = len(orjson.dumps(outcome))
            if size > self.config.max_result_bytes:
                self.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR, "message": (
                    f"the result of this task is {size} bytes, more than troupe keeps for a task "
                    f"(serve.tasks.max_result_bytes: {self.config.max_result_bytes})")})
            else:
                self.end(record, "completed", result=outcome)
        else:
            self.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR,
                                              "message": f"server {record.server} answered with no result"})

    def _round(self, record: Record, outcome: dict) -> None:
        """A modern server asked for input (MRTR) inside a minted task: its requests become the
        task's inputRequests, under keys of troupe's own (unique over the task's life)."""
        requests = outcome.get("inputRequests")
        if not isinstance(requests, dict) or not requests:
            self.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR, "message": (
                f"server {record.server} asked for input without inputRequests")})
            return
        record.round = outcome.get("requestState")
        record.round_keys, record.round_answers = {}, {}
        for their_key, request in requests.items():
            if isinstance(request, dict):
                ours = record.key()
                record.questions[ours] = request
                record.round_keys[ours] = their_key
        record.touch("input_required")
        self.changed(record)

    def end(self, record: Record, status: str, *, result: dict | None = None, error: dict | None = None,
            message: str | None = None) -> None:
        """`record` reaches terminal `status`: kept for the TTL, its waiters answered, its
        questions withdrawn, its watchers told."""
        record.result, record.error = (wire.unrelated(result) if result is not None else None), error
        for question in record.questions.values():
            if isinstance(question, ServerRequest):
                question.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"the task is {status}"))
        record.questions.clear()
        record.touch(status, message)
        self.records.finished(record)
        if error is not None:
            outcome: Any = UpstreamError(error.get("code", jsonrpc.INTERNAL_ERROR), str(error.get("message", "")),
                                         error.get("data"), server=record.server)
        elif result is not None:
            outcome = _with_related(result, record.task_id)
        else:
            outcome = UpstreamError(jsonrpc.INTERNAL_ERROR, f"the task was {status}", server="troupe")
        self._end_waiters(record, outcome)
        self.changed(record)

    def _end_waiters(self, record: Record, outcome: Any) -> None:
        waiters, record.result_waiters = record.result_waiters, []
        for on_reply, _origin, _token in waiters:
            _reply(on_reply, outcome)

    # ---------------------------------------------------------------- a server's questions

    def _question(self, req: ServerRequest) -> None:
        record = self.records.local(req.origin_request) if isinstance(req.origin_request, str) else None
        if record is None or record.terminal:
            req.on_reply(UpstreamError(jsonrpc.INVALID_REQUEST, f"troupe refuses {req.method}: the task it was "
                                       "asked for is over"))
            return
        need = NEEDS.get(req.method)
        caps = record.client_capabilities
        if need is not None and not (isinstance(caps, dict) and need in caps):
            req.on_reply(UpstreamError(modern.MISSING_CAPABILITY, f"the client did not declare {need}",
                                       {"requiredCapabilities": {need: {}}}, server=req.server))
            return
        if not record.issued and record.minted:
            self._mint(record)  # a question means the call waits for its client: a task from here on
        key = record.key()
        record.questions[key] = req
        record.touch("input_required")
        for waiter in record.result_waiters:
            self.ask_waiter(record, key, waiter)
        self.changed(record)

    def _question_withdrawn(self, server: str, upstream_id) -> None:
        for record in self.records.all():
            for key, question in list(record.questions.items()):
                if isinstance(question, ServerRequest) and question.server == server \
                        and question.upstream_id == upstream_id:
                    del record.questions[key]
                    if not record.questions and record.status == "input_required":
                        record.touch("working")
                        self.changed(record)

    def ask_waiter(self, record: Record, key: str, waiter: tuple) -> None:
        """A legacy client waiting on tasks/result is asked the task's question `key` on that
        request's own stream (2025-11-25: with the related-task key); its answer comes back here."""
        _on_reply, origin, token = waiter
        question = record.questions[key]
        method, params = (question.method, question.params) if isinstance(question, ServerRequest) else \
            (question.get("method"), question.get("params"))
        params = dict(params) if isinstance(params, dict) else {}
        params["_meta"] = {**(params.get("_meta") or {}), **wire.related(record.task_id)}
        me, local = self.actor_ref, record.local

        def answered(outcome) -> None:  # the Session's greenlet: a tell, nothing else
            tell(me, _Answer(local, key, outcome))
        tell(origin, ServerRequest(record.server, ("task", local, key), str(method), params, answered, token))

    def answer_question(self, record: Record, key: str, response: Any) -> bool:
        """The client's answer to the task's question `key` (nothing if it is not open)."""
        question = record.questions.pop(key, None)
        if question is None:
            return False
        if isinstance(question, ServerRequest):
            question.on_reply(response)
        elif not record.minted:
            self.relaying.answer(record, record.round_keys.get(key, key), response)
        else:
            record.round_answers[record.round_keys.get(key, key)] = \
                response.to_error() if isinstance(response, UpstreamError) else response
        if not record.questions:
            if record.minted and record.round_keys:
                self._next_round(record)
            record.touch("working")
            self.changed(record)
        return True

    def _next_round(self, record: Record) -> None:
        """Every input request of a modern server's round is answered: the call goes again."""
        params = {**record.params, "inputResponses": record.round_answers}
        if record.round is not None:
            params["requestState"] = record.round
        record.round, record.round_keys, record.round_answers = None, {}, {}
        me, local = self.actor_ref, record.local

        def on_reply(outcome) -> None:
            tell(me, _Upstream(local, outcome))
        if not tell(record.target, Forward("tools/call", params, on_reply, origin=me, origin_request=local,
                                           client_capabilities=record.client_capabilities)):
            self.end(record, "failed", error={"code": jsonrpc.SERVER_UNAVAILABLE,
                                              "message": f"server {record.server} went away"})

    # ---------------------------------------------------------------- a client's task requests

    def _op(self, op: TaskOp) -> None:
        if op.method == "tasks/list":
            _reply(op.on_reply, self._list(op))
            return
        assert op.ref is not None  # every other method names its task
        record = self.records.by_id(op.ref.task_id)
        if record is None and op.ref.minted:
            if self.shared is not None:  # cluster: another instance's, read from Redis
                self.shared.op(op)
                return
            _reply(op.on_reply, _unknown(op))  # past its TTL, or minted by a troupe that is gone
            return
        if record is None or not record.minted:
            self.relaying.op(op, record)
            return
        self.minted_op(op, record)

    def minted_op(self, op: TaskOp, record: Record) -> None:
        """tasks/get, update, cancel or result of a task troupe holds whole (minted, or a legacy
        server's it follows)."""
        legacy = op.legacy_client
        if op.method == "tasks/get":
            _reply(op.on_reply, wire.detailed(record.view(self.config.ttl), legacy))
        elif op.method == "tasks/update":
            responses = op.params.get("inputResponses")
            problem = _responses_problem(responses)
            if problem is not None or not isinstance(responses, dict):
                _reply(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, problem or "inputResponses"))
                return
            for key, response in responses.items():
                self.answer_question(record, key, response)
            _reply(op.on_reply, {})
        elif op.method == "tasks/cancel":
            if not record.terminal:
                self.cancel(record)
            _reply(op.on_reply, wire.to_legacy(record.view(self.config.ttl)) if legacy else {})
        elif op.method == "tasks/result":
            if record.terminal:
                self.result_waiter_done(op.on_reply, record)
                return
            waiter = (op.on_reply, op.origin, op.origin_request)
            record.result_waiters.append(waiter)
            for key in list(record.questions):
                self.ask_waiter(record, key, waiter)
        else:
            _reply(op.on_reply, UpstreamError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {op.method}"))

    def result_waiter_done(self, on_reply, record: Record) -> None:
        if record.status == "completed" and record.result is not None:
            _reply(on_reply, _with_related(record.result, record.task_id))
        elif record.error is not None:
            _reply(on_reply, UpstreamError(record.error.get("code", jsonrpc.INTERNAL_ERROR),
                                           str(record.error.get("message", "")), record.error.get("data"),
                                           server=record.server))
        else:
            _reply(on_reply, UpstreamError(jsonrpc.INTERNAL_ERROR, f"the task was {record.status}", server="troupe"))

    def cancel(self, record: Record) -> None:
        """Cancel a minted task: its upstream call is cancelled, it ends `cancelled`."""
        if record.target is not None:
            tell(record.target, CancelForward(self.actor_ref, record.local, "the task was cancelled"))
        self.end(record, "cancelled", message="cancelled by its client")

    def _list(self, op: TaskOp) -> dict:
        """2025-11-25 tasks/list: this owner's tasks only (a server's own list would show everyone's)."""
        cursor = op.params.get("cursor")
        start = int(cursor) if isinstance(cursor, str) and cursor.isdigit() else 0
        owned = [r for r in self.records.owned(op.owner) if op.owner]
        page = [wire.to_legacy(r.view(self.config.ttl)) for r in owned[start:start + LIST_PAGE]]
        out: dict = {"tasks": page}
        if start + LIST_PAGE < len(owned):
            out["nextCursor"] = str(start + LIST_PAGE)
        return out

    # ---------------------------------------------------------------- Sessions and watchers

    def _withdrawn(self, cancel: CancelForward) -> None:
        """A Session withdrew its call (cancelled, deadline, gone) before the keeper answered it; a
        task already handed out lives on."""
        origin, token = cancel.origin, cancel.origin_request
        for record in self.records.all():
            if record.waiter is not None and record.origin[0] == origin and token in (None, record.origin[1]):
                record.waiter = None
                if record.target is not None:
                    tell(record.target, CancelForward(self.actor_ref, record.local, cancel.reason))
                self.records.forget(record)
            record.result_waiters = [w for w in record.result_waiters
                                     if not (w[1] == origin and token in (None, w[2]))]
        self.relaying.withdrawn(origin, token)
        if token is None and origin is not None:
            self._watchers.pop(str(getattr(origin, "actor_urn", "")), None)

    def changed(self, record: Record) -> None:
        """Tell the task's watchers (and the legacy session that created it) its state now."""
        if not record.issued:
            return
        if self.shared is not None:
            self.shared.changed(record)
        view = None
        for ref, ids in list(self._watchers.values()):
            if record.task_id in ids:
                view = view or record.view(self.config.ttl)
                if not tell(ref, TaskChanged(record.task_id, view)):
                    self._watchers.pop(ref.actor_urn, None)
        origin = record.origin[0] if record.origin else None
        if record.legacy_client and origin is not None:
            tell(origin, TaskChanged(record.task_id, view or record.view(self.config.ttl)))

    def watched(self, record: Record) -> bool:
        return any(record.task_id in ids for _ref, ids in self._watchers.values())

    # ---------------------------------------------------------------- the clock

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._last_sweep >= SWEEP_S:
            self._last_sweep = now
            for record in self.records.expired(time.time()):
                self.records.forget(record)
        self.relaying.poll()

    def stats(self) -> dict:
        out = self.records.stats()
        out["live_by_client"] = len(self.records.live)
        out["max_per_client"] = self.config.max_per_client
        out["mint_after"] = self.config.mint_after
        if self.shared is not None:
            out["shared"] = self.shared.stats()
        return out


def _reply(on_reply, outcome) -> None:
    try:
        on_reply(outcome)
    except Exception:  # a caller's callback must not take the keeper down
        logger.exception("task keeper: a reply could not be delivered")


def _unknown(op: TaskOp) -> UpstreamError:
    return UpstreamError(jsonrpc.INVALID_PARAMS, "unknown task: no task of this client has that taskId "
                         "(it may have expired)", server="troupe")


def _responses_problem(responses: Any) -> str | None:
    if not isinstance(responses, dict):
        return "tasks/update needs inputResponses (an object)"
    for key, value in responses.items():
        if not isinstance(value, dict):
            return f"inputResponses.{key} must be an object"
    return None


def _with_related(result: dict, task_id: str) -> dict:
    """A task's result as tasks/result returns it: tied to its task (2025-11-25)."""
    out = dict(result)
    out["_meta"] = {**(result.get("_meta") or {}), **wire.related(task_id)}
    return out
