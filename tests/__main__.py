"""Run every suite: in-process suites gevent-patched, e2e (asyncio peers) unpatched.

Usage: python -m tests [extra pytest args]. Prints one closing line for both runs.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = (
    # anyio's pytest plugin imports ssl and sockets before conftest could patch them
    ("in-process actors (gevent-patched)", ["-p", "no:anyio", "tests/actors", "tests/integration"],
     {"TROUPE_TEST_GEVENT": "1"}),
    ("units and end-to-end with real peers", ["tests/unit", "tests/e2e"], {}),
)
SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors|skipped)")


def main() -> int:
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    worst = 0
    for title, paths, env in RUNS:
        print(f"\n===== {title}: {' '.join(p for p in paths if p.startswith('tests'))}", flush=True)
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *paths, *sys.argv[1:]], cwd=ROOT,
                                env={**os.environ, **env}, stdout=subprocess.PIPE, text=True)
        last = ""
        for line in proc.stdout:
            sys.stdout.write(line)
            if line.strip():
                last = line
        code = proc.wait()
        for n, kind in SUMMARY.findall(last):
            key = "failed" if kind in ("failed", "error", "errors") else kind
            totals[key] += int(n)
        if code not in (0, 5):
            worst = worst or code
        if code == 5:  # no tests collected in a suite that must have tests
            totals["failed"] += 1
            worst = worst or 1
    print(f"\ntotal: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if worst or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
