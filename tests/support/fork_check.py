"""Child of tests/e2e/test_traces.py: does anything of troupe's tracing run troupe's greenlets in a
process it forks? Gevent-patched as troupe runs, it starts actors.ops.tracing.Tracing, keeps a
greenlet that reports if it ever runs under another pid, then launches COUNT children as troupe
launches stdio servers (gevent's subprocess: a fork in Python, so at-fork hooks run in the child,
before its exec). Prints `forks done` at the end; the report line, if any, comes on stderr."""
from gevent import monkey

monkey.patch_all()

import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402

from actors.ops.tracing import Tracing  # noqa: E402

REPORT = b"a greenlet of troupe ran in a forked child\n"


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    tracing = Tracing("http://127.0.0.1:1/v1/traces", "fork-check", 0.5, "stdio")
    parent = os.getpid()

    def watch() -> None:
        while True:
            if os.getpid() != parent:
                os.write(2, REPORT)
                os._exit(0)
            gevent.sleep(0.001)
    gevent.spawn(watch)
    gevent.sleep(0.01)
    for _ in range(count):
        subprocess.run(["true"], check=True)
    tracing.stop(0.5)
    print("forks done", flush=True)


if __name__ == "__main__":
    main()
