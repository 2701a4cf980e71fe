"""A minimal FastMCP server over HTTP for the HTTP transport tests; --port 0 binds any free port and announces it."""
from __future__ import annotations

import argparse

from fastmcp import Context, FastMCP
from fastmcp.server.event_store import EventStore

from tests.servers._http import serve

# Short, so a test that makes the server drop a stream sees the client honour it
# without waiting the SDK default.
RETRY_INTERVAL_MS = 150

mcp = FastMCP("troupe-http-min")


@mcp.tool
def echo(message: str) -> str:
    """Echo the message back."""
    return f"Echo: {message}"


@mcp.tool
async def progress_then_drop(ctx: Context, steps: int = 3) -> str:
    """Report progress, drop the response stream half-way, then finish.

    The client has to resume the stream with GET + Last-Event-ID to see the rest.
    """
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps)
        if step == 1:
            await ctx.close_sse_stream()
    return f"done after {steps} steps"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="0: any free port, announced on stderr")
    parser.add_argument("--transport", choices=("http", "sse"), default="http")
    parser.add_argument("--json", action="store_true", help="answer POSTs with application/json")
    args = parser.parse_args()
    if args.transport == "sse":
        app = mcp.http_app(transport="sse")
    else:
        app = mcp.http_app(
            json_response=args.json,
            event_store=None if args.json else EventStore(),
            retry_interval=None if args.json else RETRY_INTERVAL_MS,
        )
    serve(app, args.port, "/sse" if args.transport == "sse" else "/mcp", mcp.name)


if __name__ == "__main__":
    main()
