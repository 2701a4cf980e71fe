"""A stateful stdio server: `next` returns a counter this process alone keeps, `pid` its pid (the
one tool marked idempotent) and `sleep` answers late; run once in a cluster (placement single),
every instance's calls must see one counter. Arguments are ignored (a test passes a tag to find
its processes)."""
from __future__ import annotations

import itertools
import os
import time

from tests.servers._mini import MiniServer

EMPTY = {"type": "object", "properties": {}}


def main() -> None:
    server = MiniServer("counter")
    counter = itertools.count(1)

    @server.tool("next", EMPTY, "The next number of this process's counter.")
    def next_number(args):
        return str(next(counter))

    @server.tool("sleep", {"type": "object", "properties": {"seconds": {"type": "number"}}}, "Answer late.")
    def sleep(args):
        time.sleep(float(args.get("seconds") or 0))
        return "slept"

    def pid(args):
        return str(os.getpid())
    # idempotent, and says so: troupe may send it twice (a failover re-sends it to the new owner)
    server.add_tool("pid", EMPTY, pid, "This process's pid.", annotations={"idempotentHint": True})

    server.run()


if __name__ == "__main__":
    main()
