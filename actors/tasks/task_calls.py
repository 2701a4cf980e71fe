"""The upstream call behind each task: a task-capable client's tools/call sent on by the TaskKeeper,
and, for a task troupe mints, everything that call does until it ends.

The keeper is the call's origin at the Connection, so its answer, the server's questions and a
2026-07-28 server's input rounds all come back to the keeper. Within mint_after the call is
still the client's plain call: its answer (an input round included, as SEP-2663 asks: input
gathered before a task exists stays a round of the request) goes back as it came. After that
the call is a task: the keeper answers the client with the handle and keeps the call going
under the task's own limit (`max_duration`), its rounds becoming the task's inputRequests.
Used only from the TaskKeeper's greenlet.
"""
from __future__ import annotations

import itertools
import secrets
import time
from typing import TYPE_CHECKING, Any

from loguru import logger

from actors.deadline import Deadline
from actors.messages import CancelForward, Forward, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.tasks import wire
from actors.tasks.messages import MintDue, TaskCall, UpstreamAnswered, deliver
from actors.tasks.records import Record
from actors.tells import tell

if TYPE_CHECKING:
    from actors.tasks.keeper import TaskKeeper

# A task's local key: this run's random prefix and a count (unique in a cluster's Redis too, and
# cheaper than a uuid on every task-capable call).
_RUN = secrets.token_hex(6) + "-"
_locals = itertools.count(1)


class TaskCalls:
    """The TaskKeeper's upstream calls (see the module's docstring)."""

    def __init__(self, keeper: TaskKeeper) -> None:
        self.keeper = keeper

    def start(self, call: TaskCall) -> None:
        """A task-capable client's call: a record for it, the call sent on, a task minted at once
        or after mint_after (a server with tasks of its own gets none minted)."""
        keeper = self.keeper
        record = Record(f"{_RUN}{next(_locals)}", call.server, call.form, call.owner, call.cap_key,
                        minted=not call.form)
        record.target, record.waiter, record.origin = call.target, call.on_reply, (call.origin, call.origin_request)
        record.legacy_client, record.client_capabilities = call.legacy_client, call.client_capabilities
        record.params, record.client, record.log_level = call.params, call.client, call.log_level
        if record.minted:
            record.poll_ms = keeper.config.poll_interval_ms
            record.deadline = time.monotonic() + call.max_duration  # its input rounds' waits included
        keeper.records.add(record)
        params = call.params
        if call.form == wire.LEGACY:  # the 2025-11-25 augmentation: the server creates the task
            params = {**params, "task": {"ttl": call.ttl_ms} if call.ttl_ms is not None else {}}
        self._send(record, params, call.max_duration if record.minted else None)
        if not record.minted:
            return
        mint_after = 0.0 if call.legacy_client else call.mint_after  # 2025-11-25 asked for a task: at once
        if mint_after is None or mint_after <= 0:
            if record.waiter is not None:  # not failed at once
                self.mint(record)
        else:  # a bare hub timer, killed when the answer comes first (nearly always)
            record.mint_timer = Deadline(mint_after, tell, keeper.actor_ref, MintDue(record.local))

    def _send(self, record: Record, params: dict, timeout: float | None) -> None:
        """The task's tools/call upstream (the first, or a next input round), as its client's call:
        that client's capabilities, logLevel and per-client token, and a caller of its own, so a
        server's question during it reaches this task and no other client's."""
        me, local = self.keeper.actor_ref, record.local

        def on_reply(outcome) -> None:  # the connection's greenlet: a tell, nothing else
            tell(me, UpstreamAnswered(local, outcome))
        if not tell(record.target, Forward("tools/call", params, on_reply, timeout=timeout, origin=me,
                                           origin_request=local, client_capabilities=record.client_capabilities,
                                           log_level=record.log_level, client=record.client,
                                           caller=("task", local))):
            self.answered(UpstreamAnswered(local, UpstreamError(jsonrpc.SERVER_UNAVAILABLE,
                                                                f"server {record.server} went away",
                                                                server=record.server, link_lost=True)))

    def due(self, local: str) -> None:
        """mint_after passed: the call, if it is still waiting, becomes troupe's task."""
        record = self.keeper.records.local(local)
        if record is not None and not record.issued and record.waiter is not None:
            self.mint(record)

    def mint(self, record: Record) -> None:
        """The call becomes troupe's own task: its client is answered with the handle now."""
        keeper = self.keeper
        keeper.records.issue(record, keeper.ids.issue(record.server, record.local, record.owner, True))
        waiter, record.waiter = record.waiter, None
        logger.debug("task {} minted around a call to {}", record.local, record.server)
        reply = wire.created(record.view(keeper.config.ttl), record.legacy_client)
        # cluster: the id goes out once Redis has the task (the shared side answers the waiter then)
        if keeper.shared is not None and keeper.shared.minted(record, waiter, reply):
            return
        deliver(waiter, reply)

    def answered(self, msg: UpstreamAnswered) -> None:
        """The server answered a task's call (or a followed tasks/result)."""
        keeper = self.keeper
        record = keeper.records.local(msg.local)
        if record is None:
            return  # forgotten (cancelled before it became a task, or expired)
        if msg.follow:
            keeper.relaying.followed(record, msg.outcome)
            return
        if not record.minted:
            keeper.relaying.created(record, msg.outcome)
            return
        if record.mint_timer is not None:
            record.mint_timer.kill()
            record.mint_timer = None
        if not record.issued:
            # Answered within mint_after: no task at all. A modern server's input round too goes
            # back as it came (SEP-2663: input gathered by MRTR before a task exists stays MRTR);
            # the client's retry comes here again, and a later round within a task is the task's.
            waiter, record.waiter = record.waiter, None
            keeper.records.forget(record)
            deliver(waiter, msg.outcome)
            return
        self._finished(record, msg.outcome)

    def _finished(self, record: Record, outcome: Any) -> None:
        """The upstream call of minted task `record` answered: its next input round, or its end."""
        keeper = self.keeper
        if record.terminal:
            return  # cancelled meanwhile: what the server did late changes nothing
        if modern.input_required(outcome):
            self._round(record, outcome)
            return
        if isinstance(outcome, UpstreamError):
            keeper.end(record, "failed", error=outcome.to_error())
        elif isinstance(outcome, dict):
            keeper.end(record, "completed", result=outcome)  # (failed there if too big to keep)
        else:
            keeper.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR,
                                                "message": f"server {record.server} answered with no result"})

    def _round(self, record: Record, outcome: dict) -> None:
        """A modern server asked for input (MRTR) inside a minted task: its requests become the
        task's inputRequests, under keys of troupe's own (unique over the task's life)."""
        requests = outcome.get("inputRequests")
        if not isinstance(requests, dict) or not requests:
            self.keeper.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR, "message": (
                f"server {record.server} asked for input without inputRequests")})
            return
        record.round = outcome.get("requestState")
        record.round_keys, record.round_answers = {}, {}
        for their_key, request in requests.items():
            if isinstance(request, dict) and isinstance(request.get("method"), str):
                ours = record.key()
                record.questions[ours] = request
                record.round_keys[ours] = their_key
        if not record.questions:  # nothing a client could answer: the round could never end
            record.round = None
            self.keeper.end(record, "failed", error={"code": jsonrpc.INTERNAL_ERROR, "message": (
                f"server {record.server} asked for input with no usable inputRequests (each needs a method)")})
            return
        record.touch("input_required")
        self.keeper.changed(record)

    def next_round(self, record: Record) -> None:
        """Every input request of a modern server's round is answered: the call goes again."""
        params = {**record.params, "inputResponses": record.round_answers}
        if record.round is not None:
            params["requestState"] = record.round
        record.round, record.round_keys, record.round_answers = None, {}, {}
        left = record.deadline - time.monotonic() if record.deadline is not None else None
        if left is not None and left <= 0:
            self.overran(record)
            return
        self._send(record, params, left)

    def overdue(self, now: float) -> None:
        """Minted tasks past their max_duration (waiting on their client's input, which no
        upstream timeout bounds): cancelled upstream, failed."""
        for record in self.keeper.records.all():
            if record.minted and record.deadline is not None and now >= record.deadline and not record.terminal:
                self.overran(record)

    def overran(self, record: Record) -> None:
        if record.target is not None:
            tell(record.target, CancelForward(self.keeper.actor_ref, record.local,
                                              "the task ran past its max_duration"))
        self.keeper.end(record, "failed", error={"code": jsonrpc.REQUEST_TIMEOUT, "message": (
            f"the task ran past its max_duration: it was still {record.status} "
            f"{time.time() - record.created:.0f}s after it began")})

    def cancel(self, record: Record, why: str = "cancelled by its client") -> None:
        """Cancel a minted task: its upstream call is cancelled, it ends `cancelled`."""
        if record.target is not None:
            tell(record.target, CancelForward(self.keeper.actor_ref, record.local, "the task was cancelled"))
        self.keeper.end(record, "cancelled", message=why)

    def withdrawn(self, record: Record, reason: str) -> None:
        """The client's call went (cancelled, its deadline, its Session) before it became a task:
        cancelled upstream, and forgotten."""
        record.waiter = None
        if record.mint_timer is not None:
            record.mint_timer.kill()
        if record.target is not None:
            tell(record.target, CancelForward(self.keeper.actor_ref, record.local, reason))
        self.keeper.records.forget(record)
