"""FastMCP test server "demo": tools, a resource, a resource template and a prompt; stdio or --http PORT.

--http 0 binds any free port and announces it on stderr.
"""
import argparse

from fastmcp import FastMCP

from tests.servers._http import serve

mcp = FastMCP("demo")


@mcp.tool
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@mcp.tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@mcp.resource("demo://readme", mime_type="text/plain")
def readme() -> str:
    """The demo server's readme."""
    return "This is the demo server's readme."


@mcp.resource("demo://item/{item_id}", mime_type="text/plain")
def item(item_id: str) -> str:
    """One item, by id."""
    return f"Item {item_id}"


@mcp.prompt
def summarize(topic: str) -> str:
    """Ask for a summary of a topic."""
    return f"Please summarize {topic} in three sentences."


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp (0: any free port)")
    args = p.parse_args()
    if args.http is not None:
        serve(mcp.http_app(), args.http, "/mcp", mcp.name)
    else:
        mcp.run(show_banner=False)
