"""A client's requests for a task the TaskKeeper holds whole: one it minted, or a 2025-11-25
server's it follows. tasks/get answers from the record in the client's era; tasks/update answers
the task's open questions; tasks/cancel cancels (a minted task's upstream call, too); tasks/result
(2025-11-25) waits for the end, the task's questions put to the waiting client meanwhile;
tasks/list lists the caller's own tasks, never anyone else's. Used only from the TaskKeeper's
greenlet.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.messages import UpstreamError
from actors.protocol import jsonrpc
from actors.tasks import wire
from actors.tasks.messages import TaskOp, deliver
from actors.tasks.records import Record

if TYPE_CHECKING:
    from actors.tasks.keeper import TaskKeeper

LIST_PAGE = 100  # 2025-11-25 tasks/list: tasks per page


class HeldTasks:
    """Answers TaskOps from the keeper's records (see the module's docstring)."""

    def __init__(self, keeper: TaskKeeper) -> None:
        self.keeper = keeper

    def op(self, op: TaskOp, record: Record) -> None:
        keeper, legacy = self.keeper, op.legacy_client
        if op.method == "tasks/get":
            deliver(op.on_reply, wire.detailed(record.view(keeper.config.ttl), legacy))
        elif op.method == "tasks/update":
            responses = op.params.get("inputResponses")
            problem = responses_problem(responses)
            if problem is not None or not isinstance(responses, dict):
                deliver(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, problem or "inputResponses"))
                return
            for key, response in responses.items():  # keys not open (never asked, answered) are ignored
                keeper.questions.answer(record, key, response)
            deliver(op.on_reply, {})
        elif op.method == "tasks/cancel":
            if record.terminal and legacy:  # 2025-11-25: a finished task's cancel is refused (SEP-2663: acked)
                deliver(op.on_reply, UpstreamError(jsonrpc.INVALID_PARAMS, f"the task is already {record.status}: "
                                                  "there is nothing to cancel", server="troupe"))
                return
            if not record.terminal:
                keeper.calls.cancel(record)
            deliver(op.on_reply, wire.to_legacy(record.view(keeper.config.ttl)) if legacy else {})
        elif op.method == "tasks/result":
            if record.terminal:
                self.result_done(op.on_reply, record)
                return
            waiter = (op.on_reply, op.origin, op.origin_request)
            record.result_waiters.append(waiter)
            for key in list(record.questions):
                keeper.questions.ask_waiter(record, key, waiter)
        else:
            deliver(op.on_reply, UpstreamError(jsonrpc.METHOD_NOT_FOUND, f"method not found: {op.method}"))

    def result_done(self, on_reply, record: Record) -> None:
        """tasks/result of a finished task: what the call itself would have answered."""
        deliver(on_reply, result_of(record))

    def listing(self, op: TaskOp) -> dict | UpstreamError:
        """2025-11-25 tasks/list: this owner's tasks only (a server's own list would show everyone's)."""
        cursor = op.params.get("cursor")
        if cursor is not None and not (isinstance(cursor, str) and cursor.isdigit() and len(cursor) <= 9):
            return UpstreamError(jsonrpc.INVALID_PARAMS, "tasks/list: cursor is not one troupe gave out",
                                 server="troupe")
        start = int(cursor) if cursor is not None else 0
        owned = [r for r in self.keeper.records.owned(op.owner) if op.owner]
        page = [wire.to_legacy(r.view(self.keeper.config.ttl)) for r in owned[start:start + LIST_PAGE]]
        out: dict = {"tasks": page}
        if start + LIST_PAGE < len(owned):
            out["nextCursor"] = str(start + LIST_PAGE)
        return out


def result_of(record: Record) -> Any:
    """A finished task's outcome as its call would have answered: the result, or the error."""
    if record.status == "completed" and record.result is not None:
        return wire.with_related(record.result, record.task_id)
    if record.error is not None:
        return UpstreamError(record.error.get("code", jsonrpc.INTERNAL_ERROR), str(record.error.get("message", "")),
                             record.error.get("data"), server=record.server)
    return UpstreamError(jsonrpc.INTERNAL_ERROR, f"the task was {record.status}", server="troupe")


def responses_problem(responses: Any) -> str | None:
    """What is wrong with tasks/update's inputResponses (None: an object of objects)."""
    if not isinstance(responses, dict):
        return "tasks/update needs inputResponses (an object)"
    for key, value in responses.items():
        if not isinstance(value, dict):
            return f"inputResponses.{key} must be an object"
    return None
