"""An OTLP/HTTP collector for the benchmarks that takes every export and keeps nothing: run as a
process of its own (`python scripts/_bench_otlp_sink.py`), it prints its port on stdout, counts the
exports, and answers GET /exports with that count. Its own process, as a real collector's is: a
sink inside the bench's client would take that client's interpreter while it reads each export,
and slow whichever call the client was timing then."""
from __future__ import annotations

import http.server
import sys


class Sink(http.server.BaseHTTPRequestHandler):
    """Takes every POST (its body read and dropped); GET /exports tells how many it took."""

    exports = 0
    protocol_version = "HTTP/1.1"  # keep-alive: the exporter's connection is reused, as with a collector

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).exports += 1
        self._answer(b"", "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802
        self._answer(str(type(self).exports).encode(), "text/plain")

    def _answer(self, body: bytes, kind: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
