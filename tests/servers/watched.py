"""A stdio server with one subscribable resource and a tool that reports progress, for the
streams that cross between instances of a cluster.

- resource `watch://value`: its text is a counter; `bump` increases it and, while anybody is
  subscribed, sends notifications/resources/updated;
- `count_slowly {steps}`: one progress notification per step (to the request's progressToken),
  then "counted N";
- `subscriptions`: how many resources/subscribe and resources/unsubscribe requests this process
  received, and which URIs are subscribed now (JSON text).
Arguments after the module are ignored (a test passes a tag to find its processes).
"""
from __future__ import annotations

import threading
import time

import orjson

from tests.servers._mini import METHOD_NOT_FOUND, MiniServer

URI = "watch://value"
EMPTY = {"type": "object", "properties": {}}


class WatchedServer(MiniServer):
    """MiniServer plus resources: list, read, subscribe and unsubscribe."""

    def __init__(self) -> None:
        super().__init__("watched")
        self.value = 0
        self.subscribed: set[str] = set()
        self.counts = {"subscribe": 0, "unsubscribe": 0}
        self.state = threading.Lock()

    def on_initialize(self, params: dict) -> dict:
        result = super().on_initialize(params)
        result["capabilities"]["resources"] = {"subscribe": True}
        return result

    def handle(self, msg) -> None:
        method = msg.get("method") if isinstance(msg, dict) else None
        if method not in ("resources/list", "resources/read", "resources/subscribe", "resources/unsubscribe") \
                or "id" not in msg:
            super().handle(msg)
            return
        params = msg.get("params") or {}
        if method == "resources/list":
            self.reply(msg["id"], {"resources": [{"uri": URI, "name": "value", "mimeType": "text/plain"}]})
            return
        if params.get("uri") != URI:
            self.error(msg["id"], METHOD_NOT_FOUND if method == "resources/read" else -32602,
                       f"no resource {params.get('uri')!r}")
            return
        with self.state:
            if method == "resources/read":
                result = {"contents": [{"uri": URI, "mimeType": "text/plain", "text": str(self.value)}]}
            else:
                verb = method.split("/")[1]
                self.counts[verb] += 1
                (self.subscribed.add if verb == "subscribe" else self.subscribed.discard)(URI)
                result = {}
        self.reply(msg["id"], result)

    def on_tools_call(self, id_, params: dict) -> None:
        if params.get("name") != "count_slowly":
            super().on_tools_call(id_, params)
            return
        token = (params.get("_meta") or {}).get("progressToken")  # only the request itself carries it
        steps = int((params.get("arguments") or {}).get("steps") or 3)
        threading.Thread(target=self._count, args=(id_, token, steps), daemon=True).start()

    def _count(self, id_, token, steps: int) -> None:
        for step in range(1, steps + 1):
            if token is not None:
                self.notify("notifications/progress", {"progressToken": token, "progress": step, "total": steps})
            time.sleep(0.05)
        self.reply(id_, {"content": [{"type": "text", "text": f"counted {steps}"}]})


def main() -> None:
    server = WatchedServer()

    @server.tool("bump", EMPTY, "Increase the watched value; subscribers hear of it.")
    def bump(args):
        with server.state:
            server.value += 1
            value, heard = server.value, URI in server.subscribed
        if heard:
            server.notify("notifications/resources/updated", {"uri": URI})
        return str(value)

    @server.tool("subscriptions", EMPTY, "Subscribe and unsubscribe requests received, and what is subscribed.")
    def subscriptions(args):
        with server.state:
            return orjson.dumps({**server.counts, "subscribed": sorted(server.subscribed)}).decode()

    server.add_tool("count_slowly", {"type": "object", "properties": {"steps": {"type": "integer"}}},
                    lambda args: "counted", "One progress notification per step, then the count.")
    server.run()


if __name__ == "__main__":
    main()
