"""MCP test server that dies the first time each flaky operation runs, then works (after a restart).

`--marker PREFIX`: a file PREFIX.<op> remembers that <op> already crashed once.
Flaky ops: resources/read of flaky://doc, tool `idem` (idempotentHint), tool `once` (not idempotent).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from tests.servers._mini import MiniServer, log

EMPTY = {"type": "object", "properties": {}}


class FirstCallCrashes(MiniServer):
    def __init__(self, marker: str):
        super().__init__(name="first-call-crashes")
        self.marker = marker
        self.add_tool("idem", EMPTY, lambda a: self._crash_once("idem") or "idem ok", "Idempotent, crashes once.")
        self.tools["idem"][0]["annotations"] = {"idempotentHint": True}
        self.add_tool("once", EMPTY, lambda a: self._crash_once("once") or "once ok", "Crashes once.")

    def _crash_once(self, op: str) -> None:
        path = Path(f"{self.marker}.{op}")
        if not path.exists():
            path.write_text("crashed")
            os._exit(1)

    def on_initialize(self, params: dict) -> dict:
        result = super().on_initialize(params)
        result["capabilities"]["resources"] = {}
        return result

    def handle(self, msg) -> None:
        method = msg.get("method") if isinstance(msg, dict) else None
        if method == "resources/list":
            self.reply(msg["id"], {"resources": [{"uri": "flaky://doc", "name": "doc"}]})
        elif method == "resources/read":
            log(f"first-call-crashes: read {(msg.get('params') or {}).get('uri')}")  # each read counted by tests
            self._crash_once("read")
            self.reply(msg["id"], {"contents": [{"uri": "flaky://doc", "text": "the doc"}]})
        else:
            super().handle(msg)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--marker", required=True)
    FirstCallCrashes(p.parse_args().marker).run()
