"""A stdio server whose `ask` tool asks its client a question (elicitation/create) in the middle
of the call, and whose `slow` tool only takes its time: the routing of a server's question to
the right client, or to nobody, is tested with them.

`ask {tag, delay}` waits `delay` seconds, asks "question <tag>", and answers with what the client
said (or with the error troupe gave instead of asking). `slow {seconds}` sleeps, then says so.
"""
from __future__ import annotations

import itertools
import os
import threading
import time

from tests.servers._mini import MiniServer

ANSWER_WAIT_S = 30.0


class AskerServer(MiniServer):
    """MiniServer with requests of its own to the client, and their answers routed back."""

    def __init__(self) -> None:
        super().__init__("asker")
        self._ids = itertools.count(1)
        self._waiting: dict[str, tuple[threading.Event, list]] = {}
        self._book = threading.Lock()

    def ask_client(self, method: str, params: dict) -> dict:
        rid = f"asker-{next(self._ids)}"
        done, box = threading.Event(), []
        with self._book:
            self._waiting[rid] = (done, box)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not done.wait(ANSWER_WAIT_S):
            return {"error": {"code": -1, "message": "no answer"}}
        return box[0]

    def handle(self, msg) -> None:
        if isinstance(msg, dict) and "method" not in msg and isinstance(msg.get("id"), str):
            with self._book:
                entry = self._waiting.pop(msg["id"], None)
            if entry is not None:
                entry[1].append(msg)
                entry[0].set()
            return
        super().handle(msg)


server = AskerServer()


@server.tool(schema={"type": "object", "properties": {"tag": {"type": "string"}, "delay": {"type": "number"}}})
def ask(args: dict) -> str:
    """Ask the client a question in the middle of this call; answer with what it said."""
    time.sleep(float(args.get("delay", 0)))
    reply = server.ask_client("elicitation/create", {
        "message": f"question {args.get('tag', '')}",
        "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}})
    if "error" in reply:
        return f"refused: {reply['error'].get('message')}"
    content = (reply.get("result") or {}).get("content") or {}
    return f"answer: {content.get('answer')}"


@server.tool(schema={"type": "object", "properties": {"seconds": {"type": "number"}}})
def slow(args: dict) -> str:
    """Take `seconds`, then say so."""
    time.sleep(float(args.get("seconds", 1)))
    return "slow done"


@server.tool()
def pid(args: dict) -> str:
    """This process's id."""
    return str(os.getpid())


if __name__ == "__main__":
    server.run()
