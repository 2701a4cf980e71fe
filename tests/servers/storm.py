"""A server that storms its client with tools/list_changed: `storm` answers at once, then sends
`count` notifications (as fast as it can, or spread over `seconds`); with `change` each one
follows a new version of its synthetic tools (`--tools N`, their descriptions name the
version), so every listing differs from the last. `lists` answers how many tools/list requests
it has served (`relists`: first pages only, a paginated listing counts once; `pages`: all),
how many notifications it sent and the current version."""
from __future__ import annotations

import threading
import time

import orjson

from tests.servers import echo
from tests.servers._mini import INVALID_PARAMS, MiniServer, RpcError

STORM_SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}, "seconds": {"type": "number"},
                                                 "change": {"type": "boolean"}}}
TOOL_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}}
CHANGED = "notifications/tools/list_changed"
PACE_CHUNK = 50  # notifications sent between two looks at the clock when a storm is paced


class Storm(MiniServer):
    def __init__(self, synthetic: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.synthetic = synthetic
        self.version = 0
        self.sent = 0
        self.relists = 0
        self.pages = 0

    def listing(self, version: int) -> list[dict]:
        """Every tool at this version: the real ones, then the synthetic ones naming it."""
        with self._lock:
            real = [tool for tool, _ in self.tools.values()]
        return real + [{"name": f"s{i:04d}", "description": f"Storm tool {i}, version {version}.",
                        "inputSchema": TOOL_SCHEMA} for i in range(self.synthetic)]

    def on_tools_list(self, params: dict) -> dict:
        cursor = params.get("cursor")
        with self._lock:
            self.pages += 1
            if cursor is None:
                self.relists += 1
            version = self.version
        tools = self.listing(version)
        try:
            start = int(cursor) if cursor is not None else 0
        except (TypeError, ValueError):
            raise RpcError(INVALID_PARAMS, f"bad cursor {cursor!r}") from None
        end = len(tools) if not self.page_size else start + self.page_size
        result: dict = {"tools": tools[start:end]}
        if end < len(tools):
            result["nextCursor"] = str(end)
        return result

    def storm(self, count: int, seconds: float, change: bool) -> None:
        started = time.monotonic()
        for i in range(count):
            if change:
                with self._lock:
                    self.version += 1
            self.notify(CHANGED)
            with self._lock:
                self.sent += 1
            if seconds > 0 and i % PACE_CHUNK == PACE_CHUNK - 1:
                ahead = started + seconds * (i + 1) / count - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)


def main() -> None:
    args = echo.parser(__doc__ or "").parse_args()
    server = Storm(args.tools, name=args.name, page_size=args.page_size, prefix=args.prefix_tools)
    echo.add_echo_tools(server)

    @server.tool("storm", STORM_SCHEMA, "Answer, then send count tools/list_changed (over seconds; "
                                        "with change, a new tool list before each).")
    def storm(call_args):
        count, seconds = int(call_args.get("count", 1000)), float(call_args.get("seconds", 0))
        threading.Thread(target=server.storm, args=(count, seconds, bool(call_args.get("change"))),
                         daemon=True).start()
        return f"storming {count}"

    @server.tool("lists", None, "How many tools/list requests were served, notifications sent, the version.")
    def lists(call_args):
        with server._lock:
            return orjson.dumps({"relists": server.relists, "pages": server.pages, "sent": server.sent,
                                 "version": server.version}).decode()

    server.run()


if __name__ == "__main__":
    main()
