"""Legacy echo test server that exits (status 2) on any request that comes before `initialize`,
as some real servers do; `server/discover` included. After initialize it is the echo server.
`--record FILE` appends "PID METHOD" to FILE for every request it receives."""
from __future__ import annotations

import os
import sys

from tests.servers._mini import MiniServer, log
from tests.servers.echo import add_echo_tools


class StrictLegacy(MiniServer):
    """Echo, but nothing may precede initialize."""

    def __init__(self, record: str | None = None) -> None:
        super().__init__(name="strict-legacy")
        self.initialized = False
        self.record = record

    def handle(self, msg) -> None:
        if self.record and isinstance(msg, dict) and "id" in msg:
            with open(self.record, "a") as out:
                out.write(f"{os.getpid()} {msg.get('method')}\n")
        if isinstance(msg, dict) and "id" in msg and not self.initialized:
            if msg.get("method") != "initialize":
                log(f"strict_legacy: {msg.get('method')} before initialize, exiting")
                os._exit(2)
            self.initialized = True
        super().handle(msg)


if __name__ == "__main__":
    args = sys.argv[1:]
    server = StrictLegacy(args[args.index("--record") + 1] if "--record" in args else None)
    add_echo_tools(server)
    server.run()
