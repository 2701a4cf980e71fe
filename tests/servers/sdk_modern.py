"""The official Python SDK's MCPServer as an upstream: over stdio it answers `server/discover`
and serves the 2026-07-28 era, stamping every result with resultType, caching hints and its
serverInfo in `_meta`. A tool (`shout`), one with a typed argument (`count`), a resource
(`notes://readme`), a template (`notes://{name}`), a prompt (`greet`) and completions of its
`who` argument."""
from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import Completion

app = MCPServer("sdk-modern")


@app.tool()
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@app.tool()
def count(n: int) -> str:
    """Say the number back."""
    return f"counted {n}"


@app.resource("notes://readme")
def readme() -> str:
    """The readme."""
    return "read me"


@app.resource("notes://{name}")
def note(name: str) -> str:
    """A note by name."""
    return f"note {name}"


@app.prompt()
def greet(who: str) -> str:
    """Greet someone."""
    return f"Hello, {who}!"


@app.completion()
async def complete(ref, argument, context) -> Completion:
    return Completion(values=[w for w in ("world", "wide") if w.startswith(argument.value)])


if __name__ == "__main__":
    app.run()
