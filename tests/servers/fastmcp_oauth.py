"""A FastMCP server over HTTP protected by FastMCP's in-memory OAuth provider (client registration
and revocation on; /authorize approves at once). --port 0 binds any free port and announces it.

Test-only routes (no auth): POST /test/revoke-all revokes every access and refresh token, as an
operator revoking troupe's grant at the provider would; GET /test/counts says how many tokens live.
"""
from __future__ import annotations

import argparse
import socket
import sys

import uvicorn
from fastmcp import FastMCP
from fastmcp.server.auth.auth import ClientRegistrationOptions, RevocationOptions
from fastmcp.server.auth.providers import in_memory
from fastmcp.server.auth.providers.in_memory import InMemoryOAuthProvider
from fastmcp.server.dependencies import get_access_token
from starlette.requests import Request
from starlette.responses import JSONResponse

from tests.servers._http import BACKLOG


def build(base_url: str) -> tuple[FastMCP, InMemoryOAuthProvider]:
    provider = InMemoryOAuthProvider(base_url=base_url,
                                     client_registration_options=ClientRegistrationOptions(enabled=True),
                                     revocation_options=RevocationOptions(enabled=True))
    mcp = FastMCP("troupe-oauth", auth=provider)

    @mcp.tool
    def whoami(message: str = "") -> str:
        """Answer only a signed-in client."""
        return f"signed in: {message}"

    @mcp.tool
    def grant() -> str:
        """The OAuth client the calling token was issued to (each sign-in registers its own)."""
        token = get_access_token()
        return token.client_id if token is not None else "no token"

    @mcp.custom_route("/test/revoke-all", methods=["POST"])
    async def revoke_all(request: Request) -> JSONResponse:
        count = len(provider.access_tokens) + len(provider.refresh_tokens)
        for token in list(provider.refresh_tokens):
            provider._revoke_internal(refresh_token_str=token)
        for token in list(provider.access_tokens):
            provider._revoke_internal(access_token_str=token)
        return JSONResponse({"revoked": count})

    @mcp.custom_route("/test/counts", methods=["GET"])
    async def counts(request: Request) -> JSONResponse:
        return JSONResponse({"access": len(provider.access_tokens), "refresh": len(provider.refresh_tokens),
                             "clients": len(provider.clients)})

    return mcp, provider


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True, help="0: any free port, announced on stderr")
    parser.add_argument("--token-ttl", type=int, default=3600, help="access token lifetime in seconds")
    parser.add_argument("--transport", choices=("http", "sse"), default="http")
    args = parser.parse_args()
    # The provider reads this module constant each time it issues a token.
    in_memory.DEFAULT_ACCESS_TOKEN_EXPIRY_SECONDS = args.token_ttl
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(BACKLOG)
    port = sock.getsockname()[1]
    mcp, _ = build(f"http://127.0.0.1:{port}")  # the issuer and resource URLs name the bound port
    app = mcp.http_app(transport=args.transport)
    path = "/sse" if args.transport == "sse" else "/mcp"
    print(f"{mcp.name}: serving http://127.0.0.1:{port}{path}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
