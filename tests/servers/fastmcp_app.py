"""FastMCP test server with an MCP App: a tool naming a `ui://` resource, an app-only tool, the
HTML resource itself, and a tool that tells what the calling client declared of the apps extension.

--label LABEL marks this copy's HTML and results (two copies with the same `ui://` URI behind one
troupe must stay apart); --http PORT serves streamable HTTP (0: any free port, announced on stderr);
--legacy (with --http) answers `server/discover` with method-not-found, as a server of the session
era does, so that troupe speaks to it through `initialize` and its capabilities.
"""
import argparse
import json

from fastmcp import Context, FastMCP
from fastmcp.apps.config import UI_EXTENSION_ID, AppConfig, ResourceCSP

from tests.servers._http import serve

VIEW_URI = "ui://board/view.html"
CSP = ResourceCSP(connect_domains=["https://api.example.com"])


def build(label: str) -> FastMCP:
    mcp = FastMCP("apps")

    @mcp.tool(app=AppConfig(resource_uri=VIEW_URI, visibility=["model", "app"], csp=CSP))
    def show_board(title: str = "board") -> str:
        """Show the board in its interactive view."""
        return f"{label}: board {title}"

    @mcp.tool(app=AppConfig(resource_uri=VIEW_URI, visibility=["app"]))
    def refresh_board() -> str:
        """Refresh the board's data (called by the view, not the model)."""
        return f"{label}: refreshed"

    @mcp.tool
    def client_ui(ctx: Context) -> str:
        """The calling client's io.modelcontextprotocol/ui capability as this server saw it (JSON; null: none)."""
        caps = ctx.session.client_capabilities
        extensions = (caps.extensions if caps is not None else None) or {}
        return json.dumps(extensions.get(UI_EXTENSION_ID))

    @mcp.resource(VIEW_URI, app=AppConfig(csp=CSP, prefers_border=True))
    def view() -> str:
        """The board's interactive view."""
        return f"<!DOCTYPE html><html><body><h1>{label}</h1></body></html>"

    return mcp


def session_era_only(app):
    """The ASGI app, but a POST of `server/discover` is refused as a session-era server refuses it."""
    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "server/discover":
            answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"),
                                 "error": {"code": -32601, "message": "Method not found"}}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await app(scope, replay, send)
    return wrapped


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--label", default="apps", help="marks this copy's HTML and results")
    p.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on 127.0.0.1:PORT/mcp (0: any free port)")
    p.add_argument("--legacy", action="store_true", help="with --http: refuse server/discover (a session-era server)")
    args = p.parse_args()
    server = build(args.label)
    if args.http is not None:
        app = server.http_app()
        serve(session_era_only(app) if args.legacy else app, args.http, "/mcp", server.name)
    else:
        server.run(show_banner=False)
