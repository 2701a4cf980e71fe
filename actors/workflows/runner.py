"""Runs one workflow call in its own greenlet: each step goes to the calling client's Session as
an internal tools/call (the same path as the client's own calls: profile, approvals, timeouts,
supervision, backpressure), one answer awaited per step with a deadline of its own."""
from __future__ import annotations

import itertools
import time
from typing import Any

import gevent
import gevent.event
from loguru import logger

from actors.messages import ClientMessage
from actors.protocol import jsonrpc
from actors.tells import tell
from actors.workflows import templating
from actors.workflows.model import INTERNAL_ID, Step, Workflow
from actors.workflows.templating import TemplateProblem

# A step's own net: the Session answers each step by its server's deadline; this covers a Session
# that can no longer answer at all (a start-up wait comes first, then the server's timeout).
STEP_MARGIN_S = 5.0
STEP_TEXT_LIMIT = 4096  # characters of a step's text kept in the structured record
_internal_ids = itertools.count(1)


class WorkflowCancelled(Exception):
    """Raised in a runner's greenlet (greenlet.kill) when its call is cancelled or its client left."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Skipped:
    """What templates see of a step whose `when` was false: falsy, with empty results."""

    text = ""
    structured = None
    is_error = False
    skipped = True

    def __bool__(self) -> bool:
        return False


SKIPPED = _Skipped()


class _Pending:
    """A step sent to the Session, awaiting its one answer."""

    __slots__ = ("step", "rid", "answer", "deadline")

    def __init__(self, step: Step, rid: str, answer: gevent.event.AsyncResult[tuple[Any, float]], deadline: float):
        self.step, self.rid, self.answer, self.deadline = step, rid, answer, deadline


def workflow_deadline(ctx, workflow: Workflow) -> float:
    """The Session's deadline for a whole run: each group of steps waits at most one step's own
    net (start-up, the slowest server's timeout, the margin), one group after another."""
    per_group = ctx.serve.startup_wait + ctx.slowest_timeout() + STEP_MARGIN_S
    return len(workflow.groups()) * per_group + STEP_MARGIN_S


class Runner:
    """One call of `workflow` with `input`, answering client request `rid` through `sink`, with
    progress under `progress_token` if any. Holds its own state (the steps awaiting an answer);
    reaches the Session only by telling it ClientMessages; `view()` gives the client's view of
    the catalogue now (published snapshots, no actor hop), to name each step's server."""

    def __init__(self, workflow: Workflow, input: dict, rid, sink, progress_token, session, mode: str,
                 view, ctx, principal: str = "", steps=None):
        self.workflow, self.input, self.rid, self.sink = workflow, input, rid, sink
        self.progress_token, self.session, self.mode, self.view = progress_token, session, mode, view
        self.ctx, self.principal = ctx, principal  # the calling Session's context (downstream/context.py)
        self._open: dict[str, str] = {}  # internal request id → step id, while awaiting its answer
        self.steps = steps  # actors.ops.tracing.StepSpans when the call is traced: one span per step, owned here

    # ---------------------------------------------------------------- the call

    def run(self) -> None:
        """The greenlet's body: exactly one answer, or none when cancelled (as MCP asks)."""
        try:
            answer = self._run()
        except WorkflowCancelled as exc:
            self._cancel_open(exc.reason)
            return
        except Exception as exc:  # a bug answers this call; it must not leave the client waiting
            logger.exception("workflow {} failed", self.workflow.name)
            self._cancel_open("the workflow failed")
            answer = _text_result(f"workflow {self.workflow.name}: troupe internal error: {exc}", error=True)
        self.sink(jsonrpc.result(self.rid, answer))

    def _run(self) -> dict:
        began = time.monotonic()
        steps: dict[str, Any] = {}
        context = {"input": self.input, "steps": steps}
        records: list[dict] = []
        done, total = 0, len(self.workflow.steps)
        for group in self.workflow.groups():
            group_began = time.monotonic()
            started: list[Any] = [self._start(step, context) for step in group]
            stop: str | None = None
            for step, begun in zip(group, started):
                outcome, record = self._settle(step, begun, group_began)
                steps[step.id] = outcome
                if outcome is not SKIPPED and outcome["is_error"] and step.on_error == "stop" and stop is None:
                    stop = (f"workflow {self.workflow.name}: step {step.id!r} ({step.tool} on server "
                            f"{record['server']}) failed: {outcome['text']}")
                records.append(record)
                done += 1
                self._progress(done, total, step.id)
            if stop is not None:
                return _text_result(stop, error=True, structured=_record(None, records, began))
        try:
            output = self._output(steps, context)
        except TemplateProblem as exc:
            return _text_result(f"workflow {self.workflow.name}: output template failed: {exc.message}", error=True,
                                structured=_record(None, records, began))
        return _text_result(output, structured=_record(output, records, began))

    def _settle(self, step: Step, begun, group_began: float) -> tuple[Any, dict]:
        """A step's outcome (SKIPPED, or its result as templates see it) and its record."""
        if begun is SKIPPED:
            return SKIPPED, {"id": step.id, "tool": step.tool, "server": self._server(step), "skipped": True,
                             "is_error": False}
        outcome, ended = self._wait(begun) if isinstance(begun, _Pending) else (begun, time.monotonic())
        # The server named once the step is over: a tool's server may have come up while it waited.
        record = {"id": step.id, "tool": step.tool, "server": self._server(step), "skipped": False,
                  "is_error": outcome["is_error"], "text": outcome["text"][:STEP_TEXT_LIMIT],
                  "ms": round((ended - group_began) * 1000)}
        if outcome["structured"] is not None:
            record["structured"] = outcome["structured"]
        return outcome, record

    def _output(self, steps: dict, context: dict) -> str:
        if self.workflow.output is not None:
            return self.workflow.output.value(context)
        ran = [outcome for outcome in steps.values() if outcome is not SKIPPED]
        return ran[-1]["text"] if ran else ""

    # ---------------------------------------------------------------- one step

    def _start(self, step: Step, context: dict):
        """SKIPPED, a failed outcome (its templates failed), or the _Pending call sent."""
        try:
            if step.when is not None and not templating.truthy(step.when.value(context)):
                return SKIPPED
        except TemplateProblem as exc:
            return _outcome(f"its when template failed: {exc.message}", error=True)
        try:
            args = templating.evaluate(step.args, context)
        except TemplateProblem as exc:
            return _outcome(f"its args template failed: {exc.message}", error=True)
        rid = f"{INTERNAL_ID}{next(_internal_ids)}"
        params = {"name": step.tool, "arguments": args}
        if self.mode == "meta":  # the client's own route: a meta-mode client calls through call_tool
            params = {"name": "call_tool", "arguments": params}
        if self.steps is not None:  # the step's span, its context in the request's _meta
            params = self.steps.started(rid, step, params)
        answer: gevent.event.AsyncResult[tuple[Any, float]] = gevent.event.AsyncResult()
        sink = self._step_sink(answer)
        request = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        deadline = time.monotonic() + self._step_timeout(step)
        if not tell(self.session, ClientMessage(request, sink, self.principal)):
            if self.steps is not None:
                self.steps.ended(rid, reason="the client's session has ended")
            return _outcome("the client's session has ended", error=True)
        self._open[rid] = step.id
        return _Pending(step, rid, answer, deadline)

    def _step_sink(self, answer: gevent.event.AsyncResult[tuple[Any, float]]):
        client_sink = self.sink

        def sink(message) -> None:  # any greenlet: the Session's, mostly
            if isinstance(message, dict) and "method" in message:
                client_sink(message)  # a server's request or log line on the step's way: the client's to see
            elif not answer.ready():
                answer.set((message, time.monotonic()))
        return sink

    def _wait(self, pending: _Pending) -> tuple[dict, float]:
        """The step's outcome, and when its answer came."""
        try:
            got = pending.answer.get(timeout=max(0.0, pending.deadline - time.monotonic()))
        except gevent.Timeout:
            self._cancel_open("the workflow's deadline for this step passed", only=pending.rid)
            return _outcome(f"no answer within {self._step_timeout(pending.step):g}s", error=True), time.monotonic()
        self._open.pop(pending.rid, None)
        message, arrived = got if got is not None else (None, time.monotonic())  # set() always gives a pair
        if self.steps is not None:
            self.steps.ended(pending.rid, message)
        return _from_answer(message), arrived

    def _step_timeout(self, step: Step) -> float:
        entry = self.view().tool(step.tool)
        # A tool not listed yet (its server still starting) may belong to any server: the longest timeout.
        server_timeout = self.ctx.server_timeout(entry.server) if entry is not None else self.ctx.slowest_timeout()
        return self.ctx.serve.startup_wait + server_timeout + STEP_MARGIN_S

    def _server(self, step: Step) -> str:
        entry = self.view().tool(step.tool)
        if entry is not None:
            return entry.server
        return "troupe" if step.tool.startswith("core_") else "unknown"

    # ---------------------------------------------------------------- notices

    def _progress(self, done: int, total: int, step_id: str) -> None:
        if self.progress_token is not None:
            self.sink(jsonrpc.notification("notifications/progress", {
                "progressToken": self.progress_token, "progress": done, "total": total, "message": step_id}))

    def _cancel_open(self, reason: str, only: str | None = None) -> None:
        """Cancel the steps still awaiting an answer, as a client would: the Session withdraws
        them and tells their servers (notifications/cancelled upstream)."""
        for rid in [only] if only is not None else list(self._open):
            self._open.pop(rid, None)
            if self.steps is not None:  # its span ends here: no answer is awaited any more
                self.steps.ended(rid, reason=reason)
            tell(self.session, ClientMessage(jsonrpc.notification(
                "notifications/cancelled", {"requestId": rid, "reason": reason}), _ignore, self.principal))


def _ignore(message) -> None:
    pass


def _outcome(text: str, error: bool = False, structured: Any = None) -> dict:
    """A step's result as templates see it: steps.<id>.text, .structured, .is_error."""
    return {"text": text, "structured": structured, "is_error": error, "skipped": False}


def _from_answer(message: Any) -> dict:
    if not isinstance(message, dict) or "error" in message:  # a JSON-RPC error (unknown tool, say)
        error = message.get("error") if isinstance(message, dict) else None
        if not isinstance(error, dict):
            return _outcome(f"unreadable answer: {message!r}"[:STEP_TEXT_LIMIT], error=True)
        return _outcome(f"error {error.get('code')}: {error.get('message')}", error=True)
    result = message.get("result") or {}
    texts = [c.get("text", "") for c in result.get("content") or () if isinstance(c, dict) and c.get("type") == "text"]
    return _outcome("\n".join(texts), error=result.get("isError") is True, structured=result.get("structuredContent"))


def _record(output: str | None, steps: list, began: float) -> dict:
    """The structuredContent of a workflow's answer: its output, each step, the time it took."""
    return {"output": output, "steps": steps, "ms": round((time.monotonic() - began) * 1000)}


def _text_result(text: str, error: bool = False, structured: Any = None) -> dict:
    out: dict = {"content": [{"type": "text", "text": text}]}
    if structured is not None:
        out["structuredContent"] = structured
    if error:
        out["isError"] = True
    return out
