"""Legacy echo test server that exits (status 2) on any request that comes before `initialize`,
as some real servers do; `server/discover` included. After initialize it is the echo server."""
from __future__ import annotations

import os

from tests.servers._mini import MiniServer, log
from tests.servers.echo import add_echo_tools


class StrictLegacy(MiniServer):
    """Echo, but nothing may precede initialize."""

    def __init__(self) -> None:
        super().__init__(name="strict-legacy")
        self.initialized = False

    def handle(self, msg) -> None:
        if isinstance(msg, dict) and "id" in msg and not self.initialized:
            if msg.get("method") != "initialize":
                log(f"strict_legacy: {msg.get('method')} before initialize, exiting")
                os._exit(2)
            self.initialized = True
        super().handle(msg)


if __name__ == "__main__":
    server = StrictLegacy()
    add_echo_tools(server)
    server.run()
