"""The HTTP twin of bench_backend: the fastest Streamable HTTP MCP server we can write in Python.

gevent's StreamServer, one greenlet per keep-alive connection, the request head split by hand
and JSON answers with a Content-Length: no framework, no checks. scripts/bench.py measures
troupe's HTTP front against it ("a direct HTTP server"). Announces its URL on stderr.
"""
from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import secrets  # noqa: E402
import socket  # noqa: E402
import sys  # noqa: E402

import orjson  # noqa: E402
from gevent.server import StreamServer  # noqa: E402

from tests.servers.bench_backend import VERSIONS, catalogue  # noqa: E402

CHUNK = 64 * 1024


def answer(msg: dict, tools: list[dict]) -> dict | None:
    """The reply to one JSON-RPC message (None for a notification)."""
    if "id" not in msg or "method" not in msg:
        return None
    rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        return {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text",
                                                                     "text": str(arguments.get("text", ""))}]}}
    if method == "initialize":
        asked = params.get("protocolVersion")
        return {"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1], "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-http", "version": "1"}}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"method not found: {method}"}}


def make_handler(tools: list[dict]):
    session = secrets.token_urlsafe(16)

    def handle(sock, _address) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = b""
        while True:
            end = buf.find(b"\r\n\r\n")
            while end < 0:
                chunk = sock.recv(CHUNK)
                if not chunk:
                    return
                buf += chunk
                end = buf.find(b"\r\n\r\n")
            head, buf = buf[:end].decode("latin-1"), buf[end + 4:]
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            while len(buf) < length:
                chunk = sock.recv(CHUNK)
                if not chunk:
                    return
                buf += chunk
            body, buf = buf[:length], buf[length:]
            reply = answer(orjson.loads(body), tools) if body else None
            if reply is None:
                sock.sendall(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                continue
            data = orjson.dumps(reply)
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: %s\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (session.encode(), len(data), data))
    return handle


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args(argv)
    server = StreamServer(("127.0.0.1", args.port), make_handler(catalogue(0)))
    server.init_socket()
    print(f"bench-http: serving http://127.0.0.1:{server.server_port}/mcp", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
