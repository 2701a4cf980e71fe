"""The bare relay of scripts/bench.py section 7: the least a stdio hop costs in Python on troupe's runtime.

Spawns a stdio MCP server and copies our stdin to its stdin and its stdout to our stdout, one
greenlet each way on non-blocking pipes under gevent's hub, the I/O model troupe itself must use
(DESIGN.md: always gevent-patched). `--json` parses every line and encodes it again, as any hop that
looks at the messages must. No ids, no deadlines, no checks: the floor troupe's stdio front is
measured against.
"""
from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402
import orjson  # noqa: E402
from gevent.socket import wait_read, wait_write  # noqa: E402

CHUNK = 64 * 1024


def _copy(src: int, dst: int, parse: bool) -> None:
    os.set_blocking(src, False)
    os.set_blocking(dst, False)
    pending = b""
    while True:
        try:
            chunk = os.read(src, CHUNK)
        except BlockingIOError:
            wait_read(src)
            continue
        if not chunk:
            os.close(dst)
            return
        if parse:
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            chunk = b"".join(orjson.dumps(orjson.loads(line)) + b"\n" for line in lines if line.strip())
            if not chunk:
                continue
        view = memoryview(chunk)
        while view:
            try:
                view = view[os.write(dst, view):]
            except BlockingIOError:
                wait_write(dst)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="parse and re-encode every message")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="the server's command line (after --)")
    args = p.parse_args()
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    gevent.joinall([gevent.spawn(_copy, sys.stdin.fileno(), child.stdin.fileno(), args.json),
                    gevent.spawn(_copy, child.stdout.fileno(), sys.stdout.fileno(), args.json)])
    child.wait()


if __name__ == "__main__":
    main()
