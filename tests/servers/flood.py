"""Echo MCP test server that floods at a set rate, for the slow-reader tests (issue 26):

- `flood_logs {seconds, mb_per_s, kb}` answers at once, then sends notifications/message of `kb`
  KiB each at `mb_per_s` MiB/s for `seconds` (a new flood replaces a running one);
- `flood_progress {seconds, mb_per_s, kb}` sends notifications/progress (its `message` of `kb`
  KiB) to the request's progressToken at that rate for `seconds`, then answers "progressed N";
- `flood_state` tells how many notifications the floods have sent so far and whether one runs.
"""
from __future__ import annotations

import threading
import time

import orjson

from tests.servers import echo
from tests.servers._mini import MiniServer

FLOOD_SCHEMA = {"type": "object", "properties": {
    "seconds": {"type": "number"}, "mb_per_s": {"type": "number"}, "kb": {"type": "integer"}}}
EMPTY = {"type": "object", "properties": {}}


class Flood(MiniServer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sent = 0
        self.running = 0
        self.generation = 0
        self.counts = threading.Lock()

    def on_initialize(self, params: dict) -> dict:
        result = super().on_initialize(params)
        result["capabilities"]["logging"] = {}
        return result

    def paced(self, args: dict, send) -> int:
        """Call `send(i, payload)` at the asked rate for the asked time; the number sent."""
        seconds = float(args.get("seconds", 5))
        size = int(args.get("kb", 64)) * 1024
        every = size / (float(args.get("mb_per_s", 10)) * 1024 * 1024)
        with self.counts:
            self.running += 1
            self.generation += 1
            mine = self.generation
        started = time.monotonic()
        n = 0
        try:
            while time.monotonic() - started < seconds:
                send(n, f"{n:08d}" + "x" * (size - 8))
                n += 1
                with self.counts:
                    self.sent += 1
                    if send is self.log and self.generation != mine:
                        break  # replaced by a newer log flood
                pause = started + n * every - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
        finally:
            with self.counts:
                self.running -= 1
        return n

    def log(self, n: int, payload: str) -> None:
        self.notify("notifications/message", {"level": "info", "logger": "flood", "data": payload})

    def on_tools_call(self, id_, params: dict) -> None:
        if params.get("name") != "flood_progress":
            super().on_tools_call(id_, params)
            return
        token = (params.get("_meta") or {}).get("progressToken")
        args = params.get("arguments") or {}

        def progress() -> None:
            def send(n: int, payload: str) -> None:
                if token is not None:
                    self.notify("notifications/progress", {"progressToken": token, "progress": n, "message": payload})
            sent = self.paced(args, send)
            self.reply(id_, {"content": [{"type": "text", "text": f"progressed {sent}"}]})
        threading.Thread(target=progress, daemon=True).start()


def main() -> None:
    server = echo.build(echo.parser(__doc__).parse_args(), Flood)
    assert isinstance(server, Flood)

    @server.tool("flood_logs", FLOOD_SCHEMA, "Answer, then send log notifications at a rate for a time.")
    def flood_logs(args):
        threading.Thread(target=server.paced, args=(args, server.log), daemon=True).start()
        return "flooding"

    @server.tool("flood_progress", FLOOD_SCHEMA, "Send progress at a rate for a time, then answer.")
    def flood_progress(args):  # answered by Flood.on_tools_call; listed through this entry
        return "unreachable"

    @server.tool("flood_state", EMPTY, "Notifications sent so far, and whether a flood runs.")
    def flood_state(args):
        with server.counts:
            return orjson.dumps({"sent": server.sent, "running": server.running}).decode()

    server.run()


if __name__ == "__main__":
    main()
