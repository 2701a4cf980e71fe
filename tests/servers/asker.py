"""A stdio server that says which process it is and asks its client questions (share: per_client tests).

Tools: whoami (its pid), ask (an elicitation/create naming its pid, answered in the result), slow
(sleeps `seconds`, then its pid), ask_later (asks `delay` seconds after answering, outside any
call), answers (what the later questions got), crash (exits at once). `--start-delay S` sleeps
before it reads anything, so a first call has to wait for the start.
"""
from __future__ import annotations

import itertools
import os
import sys
import threading
import time

from tests.servers._mini import MiniServer

ANSWER_WAIT = 30.0


class Asker(MiniServer):
    def __init__(self) -> None:
        super().__init__("asker")
        self._ids = itertools.count(1)
        self._waiting: dict[str, tuple[threading.Event, list]] = {}
        self.later: list[str] = []
        pid = os.getpid()
        self.add_tool("whoami", None, lambda args: str(pid))
        self.add_tool("ask", None, lambda args: f"{pid} got {self.elicit(f'question from {pid}')}")
        self.add_tool("slow", {"type": "object", "properties": {"seconds": {"type": "number"}}},
                      lambda args: (time.sleep(float(args.get("seconds", 1))), str(pid))[1])
        self.add_tool("ask_later", {"type": "object", "properties": {"delay": {"type": "number"}}}, self._ask_later)
        self.add_tool("answers", None, lambda args: "|".join(self.later))
        self.add_tool("crash", None, lambda args: os._exit(3))

    def elicit(self, message: str) -> str:
        """Ask the client; the action and content it answered (or its error)."""
        rid = f"ask-{next(self._ids)}"
        done, box = threading.Event(), []
        self._waiting[rid] = (done, box)
        self.send({"jsonrpc": "2.0", "id": rid, "method": "elicitation/create", "params": {
            "message": message, "requestedSchema": {"type": "object", "properties": {"answer": {"type": "string"}}}}})
        if not done.wait(ANSWER_WAIT):
            return "no answer"
        reply = box[0]
        if "error" in reply:
            return f"error {reply['error'].get('message')}"
        result = reply.get("result") or {}
        return f"{result.get('action')} {(result.get('content') or {}).get('answer')}"

    def _ask_later(self, args: dict) -> str:
        def later() -> None:
            time.sleep(float(args.get("delay", 0.3)))
            self.later.append(self.elicit(f"later question from {os.getpid()}"))
        threading.Thread(target=later, daemon=True).start()
        return "scheduled"

    def handle(self, msg) -> None:
        if isinstance(msg, dict) and "method" not in msg and msg.get("id") in self._waiting:
            done, box = self._waiting.pop(msg["id"])
            box.append(msg)
            done.set()
            return
        super().handle(msg)


if __name__ == "__main__":
    if "--start-delay" in sys.argv:
        time.sleep(float(sys.argv[sys.argv.index("--start-delay") + 1]))
    Asker().run()
