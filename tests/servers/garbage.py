"""Echo MCP test server that surrounds every valid message on stdout with junk lines;
with --flood N it also prints about N non-JSON lines a second, forever."""
import threading
import time

from tests.servers import echo
from tests.servers._mini import MiniServer

JUNK = (
    b"this line is not json",
    b"",  # blank line
    b'{"jsonrpc": "2.0", "id": 1, "result": {"tools": [',  # partial JSON, cut mid-object
    b'["a", "json", "array"]',
    b'{"no_jsonrpc_field": true, "id": 424242, "result": {}}',
    "ünïcödé log line ✓".encode(),
)
FLOOD_BATCHES_PER_SEC = 100


class Garbage(MiniServer):
    def junk(self) -> None:
        for line in JUNK:
            self.send_raw(line)

    def send(self, message):
        # Junk before each valid message means junk before the handshake reply and between replies.
        self.junk()
        super().send(message)

    def flood(self, per_second: int) -> None:
        """Non-JSON lines at about `per_second`, in batches; blocks when the reader lags."""
        per_batch = max(1, per_second // FLOOD_BATCHES_PER_SEC)
        n = 0
        next_batch = time.monotonic()
        while True:
            batch = b"\n".join(b"flood line %08d: this is not JSON at all" % (n + i) for i in range(per_batch))
            n += per_batch
            self.send_raw(batch)
            next_batch += 1 / FLOOD_BATCHES_PER_SEC
            time.sleep(max(0.0, next_batch - time.monotonic()))


if __name__ == "__main__":
    parser = echo.parser(__doc__)
    parser.add_argument("--flood", type=int, default=0, help="non-JSON lines a second, forever")
    args = parser.parse_args()
    server = echo.build(args, Garbage)
    server.junk()
    if args.flood:
        threading.Thread(target=server.flood, args=(args.flood,), daemon=True).start()
    server.run()
