"""POST-only Streamable HTTP front for the modern-only test server (MCP 2026-07-28): JSON answers,
an SSE stream for subscriptions/listen, 400/404 with a JSON-RPC error body, 405 for GET/DELETE."""
from __future__ import annotations

import queue
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

from tests.servers.modern_only import ModernServer

KEEPALIVE = 1.0  # seconds between SSE comments on an idle listen stream (notices a gone client)


def serve_http(server: ModernServer, port: int) -> None:
    """Serve until killed on 127.0.0.1:port; announce the URL on stderr once listening."""

    class Handler(BaseHTTPRequestHandler):
        """One HTTP exchange with the modern test server."""

        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002  (the base class's name)
            pass

        def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802  (http.server's naming)
            self._send(405, b"")

        do_DELETE = do_GET  # noqa: N815

        def do_POST(self):  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                msg = orjson.loads(body)
            except orjson.JSONDecodeError:
                self._send(400, b'{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}')
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            if msg.get("method") == "subscriptions/listen":
                self._listen(msg, headers)
                return
            answer = server.handle(msg, headers)
            if answer is None:
                self._send(202, b"")
            else:
                self._send(answer[1], orjson.dumps(answer[0]))

        def _listen(self, msg: dict, headers: dict) -> None:
            events: queue.Queue = queue.Queue()
            answer = server.handle(msg, headers, events.put)
            if answer is not None:  # refused: an error body instead of a stream
                self._send(answer[1], orjson.dumps(answer[0]))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            try:
                while True:
                    try:
                        item = events.get(timeout=KEEPALIVE)
                        self.wfile.write(b"event: message\ndata: " + orjson.dumps(item) + b"\n\n")
                    except queue.Empty:
                        self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
            except OSError:  # the client closed the stream: that is its cancel
                with server.lock:
                    server.listens.pop(msg.get("id"), None)

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler, bind_and_activate=False)
    httpd.daemon_threads = True
    httpd.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    httpd.server_bind()
    httpd.server_activate()
    print(f"modern_only: serving http://127.0.0.1:{httpd.server_address[1]}/mcp", file=sys.stderr, flush=True)
    httpd.serve_forever()
