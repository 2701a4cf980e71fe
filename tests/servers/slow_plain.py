"""A FastMCP stdio server without tasks whose `sleep_then(seconds, text)` sleeps, then answers
the text: a slow plain tool call."""
from __future__ import annotations

import asyncio

from fastmcp import FastMCP

mcp = FastMCP("slow-plain")


@mcp.tool
async def sleep_then(seconds: float, text: str) -> str:
    """Sleep `seconds`, then say the text back."""
    await asyncio.sleep(seconds)
    return text


if __name__ == "__main__":
    mcp.run(show_banner=False)
