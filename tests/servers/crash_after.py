"""Echo-like MCP test server that dies (exit 1) on its N-th tools/call, before replying."""
from __future__ import annotations

import os

from tests.servers import echo
from tests.servers._mini import MiniServer, log


class CrashAfter(MiniServer):
    calls_left = 1

    def before_call(self, id_, name, args):
        # Counted on the reader thread, so "N-th" means N-th received.
        self.calls_left -= 1
        if self.calls_left <= 0:
            log(f"crash_after: exiting on call {id_}")
            os._exit(1)


def main() -> None:
    p = echo.parser(__doc__)
    p.add_argument("--calls", type=int, default=1, help="die on this tools/call (1-based)")
    args = p.parse_args()
    server = echo.build(args, CrashAfter)
    server.calls_left = args.calls
    server.run()


if __name__ == "__main__":
    main()
