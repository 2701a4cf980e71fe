"""A recorder: a tiny HTTP server on its own loopback port that answers from a table and records
every request it gets (method, path with query, headers, body), so a test can say what troupe
sent where, and above all what it never sent. Runs in a thread of the test process."""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Seen:
    """One request a recorder got."""

    method: str
    path: str  # with its query
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    """What a recorder answers to one method and path."""

    status: int = 200
    body: Any = None  # JSON-encoded unless bytes
    headers: tuple[tuple[str, str], ...] = ()


class Recorder:
    """`routes[(method, path)] = Answer(...)`; anything else is a 404. `seen` lists every request."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Answer] = {}
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with recorder._lock:
                    recorder.seen.append(Seen(self.command, self.path, dict(self.headers), body))
                answer = recorder.routes.get((self.command, self.path.partition("?")[0]), Answer(404, {}))
                data = answer.body if isinstance(answer.body, bytes) else json.dumps(answer.body).encode()
                self.send_response(answer.status)
                for name, value in answer.headers:
                    self.send_header(name, value)
                if not any(name.lower() == "content-type" for name, _ in answer.headers):
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PUT = _any

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the record is `seen`

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True, name=f"recorder-{self.port}")
        self._thread.start()

    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def paths(self, method: str | None = None) -> list[str]:
        return [s.path for s in self.requests() if method is None or s.method == method]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
