"""Echo MCP test server that surrounds every valid message on stdout with junk lines."""
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


class Garbage(MiniServer):
    def junk(self) -> None:
        for line in JUNK:
            self.send_raw(line)

    def send(self, message):
        # Junk before each valid message means junk before the handshake reply and between replies.
        self.junk()
        super().send(message)


if __name__ == "__main__":
    server = echo.build(echo.parser(__doc__).parse_args(), Garbage)
    server.junk()
    server.run()
