"""Serve a test server's ASGI app on loopback, announcing the port it bound (port 0: any free one)."""
from __future__ import annotations

import socket
import sys

import uvicorn

BACKLOG = 128


def serve(app, port: int, path: str, name: str) -> None:
    """Bind 127.0.0.1:port, announce "NAME: serving http://127.0.0.1:PORT/PATH" on stderr, serve until killed.

    The socket listens before the announcement, so a client that read it can connect at once
    (tests/support/ports.py start_announced waits for this line).
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds its own
    sock.bind(("127.0.0.1", port))  # loopback only: the tests never want a port reachable from outside
    sock.listen(BACKLOG)
    print(f"{name}: serving http://127.0.0.1:{sock.getsockname()[1]}{path}", file=sys.stderr, flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
