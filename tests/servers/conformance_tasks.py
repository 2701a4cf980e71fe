"""The fixture tools the conformance suite's tasks scenarios (SEP-2663, 0.2 alpha) call by name, on
FastMCP with the tasks extension (fastmcp-tasks, in-memory Docket backend):

- `greet {name}`: sync only, "Hello, {name}!".
- `slow_compute {seconds, label}`: task-supporting (optional), sleeps `seconds` then answers;
  a cancelled run settles to `cancelled`.
- `failing_job`: task support *required*; always a tool execution error after ~1 s (a completed
  task with isError), and -32021 for a client that did not declare the extension.
- `protocol_error_job`: task-supporting; raises a protocol error, so its task is `failed`.
- `confirm_delete {filename}`: task-supporting; asks one elicitation, then completes.
- `multi_input`: task-supporting; asks two elicitations at once (answered one at a time).
- `test_tool_with_task`: task support *required*; round 1 is a synchronous input_required result
  (SEP-2322) asking `user_name`, round 2 (the answer echoed back) becomes a task whose result
  names the user.

stdio by default; `--http PORT` serves Streamable HTTP at /mcp (0: any free port, announced)."""
from __future__ import annotations

import argparse
import asyncio

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension
from fastmcp_tasks.creation import create_task
from mcp.shared.exceptions import MCPError

MRTR_TOOL = "test_tool_with_task"
FAILING_AFTER_S = 1.0


def _elicit(message: str, prop: str, kind: str) -> mcp_types.ElicitRequest:
    return mcp_types.ElicitRequest(params=mcp_types.ElicitRequestFormParams(
        message=message, requested_schema={"type": "object", "properties": {prop: {"type": kind}},
                                           "required": [prop]}))


def _answered(reply: object, prop: str) -> object:
    return (getattr(reply, "content", None) or {}).get(prop)


class MrtrThenTask(TasksExtension):
    """The tasks extension, plus the MRTR-then-task composition `test_tool_with_task` needs:
    fastmcp-tasks tasks a required tool on its first call, but this one gathers `user_name`
    synchronously first and only becomes a task on the round that carries the answer."""

    async def intercept_tool_call(self, params, context, call_next):
        if params.name != MRTR_TOOL:
            return await super().intercept_tool_call(params, context, call_next)
        answers = context.input_responses or {}
        if "user_name" not in answers:
            # Round 1 runs the body in the foreground, which asks (a tool-level InputRequiredResult).
            return await call_next()
        # Round 2: the task's worker has no wire request, so the answer travels as an argument.
        tool = await context.fastmcp.get_tool(params.name)
        assert tool is not None  # registered below
        name = _answered(answers["user_name"], "name")
        return await create_task(tool, {"user_name": str(name)}, context)


mcp = FastMCP("conformance-tasks")
mcp.add_extension(MrtrThenTask(url="memory://"))


@mcp.tool
def greet(name: str) -> str:
    """Greet someone by name (never a task)."""
    return f"Hello, {name}!"


@mcp.tool(task=True)
async def slow_compute(seconds: float = 1.0, label: str = "") -> str:
    """Sleep `seconds`, then report the label."""
    await asyncio.sleep(seconds)
    return f"computed {label} after {seconds}s"


@mcp.tool(task=TaskConfig(mode="required"))
async def failing_job() -> str:
    """Fail as a tool (isError) after about a second."""
    await asyncio.sleep(FAILING_AFTER_S)
    raise ToolError("failing_job always fails")


@mcp.tool(task=True)
async def protocol_error_job() -> str:
    """Fail with a protocol-level error (the task ends `failed`, not completed with isError)."""
    raise MCPError(code=mcp_types.INTERNAL_ERROR, message="protocol_error_job: internal failure")


@mcp.tool(task=True)
async def confirm_delete(ctx: Context, filename: str) -> str:
    """Ask for confirmation (one elicitation), then report what was decided."""
    reply = (ctx.input_responses or {}).get("confirm")
    if reply is None:
        return mcp_types.InputRequiredResult(input_requests={  # type: ignore[return-value]
            "confirm": _elicit(f"Delete {filename}?", "confirm", "boolean")})
    return f"{'deleted' if _answered(reply, 'confirm') else 'kept'} {filename}"


@mcp.tool(task=True)
async def multi_input(ctx: Context) -> str:
    """Ask two elicitations at once; complete when both are answered."""
    answers = ctx.input_responses or {}
    if "first" not in answers or "second" not in answers:
        return mcp_types.InputRequiredResult(input_requests={  # type: ignore[return-value]
            "first": _elicit("First name?", "name", "string"),
            "second": _elicit("Second name?", "name", "string")})
    return f"{_answered(answers['first'], 'name')} and {_answered(answers['second'], 'name')}"


@mcp.tool(name=MRTR_TOOL, task=TaskConfig(mode="required"))
async def tool_with_task(ctx: Context, user_name: str = "") -> str:
    """Ask for `user_name` (round 1, synchronous), then greet it from a task (round 2)."""
    if not user_name:
        return mcp_types.InputRequiredResult(input_requests={  # type: ignore[return-value]
            "user_name": _elicit("What is your name?", "name", "string")})
    return f"Hello, {user_name}! (from a task)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, default=None, metavar="PORT")
    args = parser.parse_args()
    if args.http is None:
        mcp.run(show_banner=False)
        return
    from tests.servers._http import serve
    serve(mcp.http_app(), args.http, "/mcp", mcp.name)


if __name__ == "__main__":
    main()
