"""A FastMCP server with the SEP-2663 tasks extension (fastmcp-tasks, in-memory Docket backend):
task tools `slow_add` (optional), `ask_name` (asks for a name mid-task), `wait_forever` (runs
until cancelled), a plain `echo`, and `cancelled_count` (how many tasks saw their cancellation).
It tasks a call only on the 2026-07-28 era, and only when the call's `_meta` declares the
extension. Cancellation is also observable across processes: `wait_forever` appends a line
"started" to the file named by TASKS_CANCEL_MARKER (if set) when its body begins, and
"cancelled" when it sees its cancellation (a task cancelled while still queued never starts,
so a test waits for "started" before it cancels).
stdio by default; `--http PORT` serves Streamable HTTP at /mcp (0: any free port, announced)."""
from __future__ import annotations

import argparse
import asyncio
import os

import mcp_types
from fastmcp import Context, FastMCP
from fastmcp_tasks import TasksExtension

mcp = FastMCP("troupe-tasks")
mcp.add_extension(TasksExtension(url="memory://"))

# The worker runs in this process (memory:// backend), so a module counter is seen by every call.
_cancelled = {"count": 0}


def _mark(line: str) -> None:
    marker = os.environ.get("TASKS_CANCEL_MARKER")
    if marker:
        with open(marker, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@mcp.tool(task=True)
async def slow_add(a: int, b: int, seconds: float = 1.0) -> int:
    """Sleep `seconds`, then return a + b."""
    await asyncio.sleep(seconds)
    return a + b


@mcp.tool(task=True)
async def ask_name(ctx: Context) -> str:
    """Ask the client for a name (an elicitation), then greet it."""
    answers = ctx.input_responses or {}
    reply = answers.get("name")
    if reply is None:
        # The guard pattern: the task parks in input_required until tasks/update answers "name".
        return mcp_types.InputRequiredResult(input_requests={"name": mcp_types.ElicitRequest(
            params=mcp_types.ElicitRequestFormParams(
                message="What is your name?",
                requested_schema={"type": "object", "properties": {"name": {"type": "string"}},
                                  "required": ["name"]}))})  # type: ignore[return-value]
    content = getattr(reply, "content", None) or {}
    return f"hello {content.get('name')}"


@mcp.tool(task=True)
async def wait_forever() -> str:
    """Run until cancelled."""
    _mark("started")
    try:
        while True:
            await asyncio.sleep(0.05)
    except asyncio.CancelledError:
        _cancelled["count"] += 1
        _mark("cancelled")
        raise


@mcp.tool
def echo(text: str) -> str:
    """Say the text back (a plain call, never a task)."""
    return text


@mcp.tool
def cancelled_count() -> int:
    """How many tasks have seen their cancellation so far."""
    return _cancelled["count"]


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
