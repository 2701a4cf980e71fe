"""Echo MCP test server that sends messages with unusable ids (a list, an object, true) before
each proper answer: replies, a request, a cancel and a progress notification."""
from tests.servers import echo
from tests.servers._mini import MiniServer


class BadIds(MiniServer):
    def before_call(self, id_, name: str, args: dict) -> None:
        for bad in ([id_], {"id": id_}, True):
            self.send({"jsonrpc": "2.0", "id": bad, "result": {"content": [{"type": "text", "text": "wrong"}]}})
        self.send({"jsonrpc": "2.0", "id": [1, 2], "method": "ping"})
        self.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [id_]}})
        self.send({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": {"t": 1}, "progress": 1}})


if __name__ == "__main__":
    echo.build(echo.parser(__doc__).parse_args(), BadIds).run()
