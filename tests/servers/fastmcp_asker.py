"""A FastMCP server over Streamable HTTP whose `ask` tool asks its client a question in the middle
of the call (on that call's own response stream), and whose `slow` tool only takes its time.
It speaks the handshake era only (FastMCP asks no questions in the 2026-07-28 era): a probe with
`server/discover` is answered "method not found", as a legacy server does.
--port 0 binds any free port and announces it."""
from __future__ import annotations

import argparse
import asyncio
import json

from fastmcp import Context, FastMCP

from tests.servers._http import serve

mcp = FastMCP("troupe-asker")


@mcp.tool
async def ask(ctx: Context, tag: str = "", delay: float = 0.0) -> str:
    """Ask the client a question in the middle of this call; answer with what it said."""
    await asyncio.sleep(delay)
    try:
        reply = await ctx.elicit(f"question {tag}", response_type=str)
    except Exception as exc:  # troupe refused to ask anyone: the tool says so
        return f"refused: {exc}"
    return f"answer: {getattr(reply, 'data', None)}"


@mcp.tool
async def slow(seconds: float = 1.0) -> str:
    """Take `seconds`, then say so."""
    await asyncio.sleep(seconds)
    return "slow done"


def legacy_only(app):
    """ASGI wrapper: a POST of `server/discover` gets -32601, everything else reaches FastMCP."""
    async def guarded(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            event = await receive()
            chunks.append(event.get("body", b""))
            more = event.get("more_body", False)
        body = b"".join(chunks)
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if isinstance(message, dict) and message.get("method") == "server/discover":
            answer = json.dumps({"jsonrpc": "2.0", "id": message.get("id"),
                                 "error": {"code": -32601, "message": "Method not found"}}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def again():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        await app(scope, again, send)
    return guarded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="0: any free port, announced on stderr")
    args = parser.parse_args()
    app = mcp.http_app()
    serve(_Lifespanned(app, legacy_only(app)), args.port, "/mcp", mcp.name)


class _Lifespanned:
    """The guarded app, with the lifespan events going to FastMCP's own app (it starts its session manager there)."""

    def __init__(self, app, guarded) -> None:
        self.app, self.guarded = app, guarded

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
        else:
            await self.guarded(scope, receive, send)


if __name__ == "__main__":
    main()
