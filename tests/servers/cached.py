"""A stdio server that counts every call it really gets, for the response cache's tests: `lookup`
(readOnlyHint: true), `fetch` (no annotations: cached only when the config names it), `bump` (not
read-only), `fails` (a read-only tool that always answers isError), one resource `mem://doc`, and
tools that make it send `notifications/tools/list_changed` (`grow`: adds a tool), send
`notifications/resources/updated` for mem://doc (`touch`), or exit (`crash`). Every answer names
the call's number and this process's pid, so a test tells a cached answer from a fresh one."""
from __future__ import annotations

import itertools
import os
import threading
from typing import Any

from tests.servers._mini import METHOD_NOT_FOUND, MiniServer

KEYED = {"type": "object", "properties": {"key": {"type": "string"}, "n": {"type": "number"}}}
EMPTY = {"type": "object", "properties": {}}
DOC = "mem://doc"


class CachedServer(MiniServer):
    """MiniServer with one readable resource and counters of the calls it answered."""

    def __init__(self) -> None:
        super().__init__("cached")
        self.counts: dict[str, itertools.count] = {}
        self.count_lock = threading.Lock()

    def next(self, what: str) -> int:
        with self.count_lock:
            return next(self.counts.setdefault(what, itertools.count(1)))

    def on_initialize(self, params: dict) -> dict:
        result = super().on_initialize(params)
        result["capabilities"]["resources"] = {"listChanged": True}
        return result

    def handle(self, msg: Any) -> None:
        method = msg.get("method") if isinstance(msg, dict) else None
        if method == "resources/list":
            self.reply(msg["id"], {"resources": [{"uri": DOC, "name": "doc", "mimeType": "text/plain"}]})
        elif method == "resources/read":
            uri = (msg.get("params") or {}).get("uri")
            if uri != DOC:
                self.error(msg["id"], METHOD_NOT_FOUND, f"no resource {uri}")
                return
            text = f"doc read #{self.next('read')} pid {os.getpid()}"
            self.reply(msg["id"], {"contents": [{"uri": DOC, "mimeType": "text/plain", "text": text}]})
        else:
            super().handle(msg)


def main() -> None:
    server = CachedServer()
    pid = os.getpid()

    def counted(name: str):
        def handler(args: dict) -> str:
            return f"{name} {args.get('key', '')} #{server.next(name)} pid {pid}"
        return handler

    server.add_tool("lookup", KEYED, counted("lookup"), "Read something (counted).",
                    annotations={"readOnlyHint": True})
    server.add_tool("fetch", KEYED, counted("fetch"), "Read something, not annotated (counted).")
    server.add_tool("bump", KEYED, counted("bump"), "Change something (counted).",
                    annotations={"readOnlyHint": False})

    def fails(args: dict) -> dict:
        return {"content": [{"type": "text", "text": f"failed #{server.next('fails')}"}], "isError": True}
    server.add_tool("fails", EMPTY, fails, "A read that always fails (counted).", annotations={"readOnlyHint": True})

    def grow(args: dict) -> str:
        name = f"extra{server.next('grow')}"
        server.add_tool(name, EMPTY, counted(name), "Added by grow.")
        server.notify("notifications/tools/list_changed")
        return f"added {name}"
    server.add_tool("grow", EMPTY, grow, "Add a tool and say the list changed.")

    def touch(args: dict) -> str:
        server.notify("notifications/resources/updated", {"uri": DOC})
        return "touched"
    server.add_tool("touch", EMPTY, touch, "Say mem://doc was updated.")

    def crash(args: dict) -> str:
        os._exit(3)
    server.add_tool("crash", EMPTY, crash, "Exit at once.")
    server.run()


if __name__ == "__main__":
    main()
