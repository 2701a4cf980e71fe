"""A server's questions inside a task (elicitation, sampling, roots) and the client's answers.

A question a server asks during a task's call reaches the TaskKeeper (the call's origin). It makes
the task `input_required`: a 2026-07-28 client sees it in the task's inputRequests and answers
with tasks/update; a 2025-11-25 client waiting on tasks/result is asked it on that request's own
stream, tagged with the task (and nobody else is ever asked). A question the task's client
cannot take (it did not declare the capability) is refused upstream at once. Used only from the
TaskKeeper's greenlet.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.downstream.client_requests import NEEDS
from actors.messages import ServerRequest, ServerRequestCancelled, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.tasks import wire
from actors.tasks.messages import QuestionAnswered
from actors.tasks.records import Record
from actors.tells import tell

if TYPE_CHECKING:
    from actors.tasks.keeper import TaskKeeper


class Questions:
    """The TaskKeeper's open questions, kept in each task's record (see the module's docstring)."""

    def __init__(self, keeper: TaskKeeper) -> None:
        self.keeper = keeper

    def asked(self, req: ServerRequest) -> None:
        """A server asks, inside the task whose call carries `req.origin_request`."""
        keeper = self.keeper
        record = keeper.records.local(req.origin_request) if isinstance(req.origin_request, str) else None
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
            keeper.calls.mint(record)  # a question means the call waits for its client: a task from here on
        key = record.key()
        record.questions[key] = req
        record.touch("input_required")
        for waiter in record.result_waiters:
            self.ask_waiter(record, key, waiter)
        keeper.changed(record)

    def withdrawn(self, cancelled: ServerRequestCancelled) -> None:
        """The server cancelled its question: no client is asked it any more. Told apart by its
        on_reply where the Connection gave it (another client's own upstream of the same server
        numbers its requests alike)."""
        server, upstream_id, on_reply = cancelled.server, cancelled.upstream_id, cancelled.on_reply
        for record in self.keeper.records.all():
            for key, question in list(record.questions.items()):
                if isinstance(question, ServerRequest) and question.server == server \
                        and question.upstream_id == upstream_id and on_reply in (None, question.on_reply):
                    del record.questions[key]
                    if not record.questions and record.status == "input_required":
                        record.touch("working")
                        self.keeper.changed(record)

    def ask_waiter(self, record: Record, key: str, waiter: tuple) -> None:
        """A legacy client waiting on tasks/result is asked the task's question `key` on that
        request's own stream (2025-11-25: with the related-task key); its answer comes back here."""
        _on_reply, origin, token = waiter
        question = record.questions[key]
        method, params = (question.method, question.params) if isinstance(question, ServerRequest) else \
            (question.get("method"), question.get("params"))
        params = wire.unrelated(dict(params)) if isinstance(params, dict) else {}
        params["_meta"] = {**(params.get("_meta") or {}), **wire.related(record.task_id)}
        me, local = self.keeper.actor_ref, record.local

        def answered(outcome) -> None:  # the Session's greenlet: a tell, nothing else
            tell(me, QuestionAnswered(local, key, outcome))
        tell(origin, ServerRequest(record.server, ("task", local, key), str(method), params, answered, token))

    def answered(self, msg: QuestionAnswered) -> None:
        record = self.keeper.records.local(msg.local)
        if record is not None:
            self.answer(record, msg.key, msg.outcome)

    def answer(self, record: Record, key: str, response: Any) -> bool:
        """The client's answer to the task's question `key` (nothing if it is not open): to the
        server that asked, or, for a modern server's round, kept until the round is whole."""
        question = record.questions.pop(key, None)
        if question is None:
            return False
        keeper = self.keeper
        if isinstance(question, ServerRequest):
            question.on_reply(response)
        elif not record.minted:
            keeper.relaying.answer(record, record.round_keys.get(key, key), response)
        else:
            record.round_answers[record.round_keys.get(key, key)] = \
                response.to_error() if isinstance(response, UpstreamError) else response
        if not record.questions:
            if record.minted and record.round_keys:
                keeper.calls.next_round(record)
            record.touch("working")
            keeper.changed(record)
        return True
