"""Run every suite: in-process suites gevent-patched, e2e (asyncio peers) unpatched.

Usage: python -m tests [--quick] [extra pytest args]. Prints one closing line for all runs.
ruff and pyright run first, each counted as one test.
Plain, the runs go one after the other with their output streamed: everything, as CI runs it.
--quick leaves out the tests marked slow (soak, bench, browser, conformance...) and runs at
once the in-process run and the unit and end-to-end run split in QUICK_SHARDS (their tests
mostly wait on troupe and its peers); each prints its output when it ends.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = (
    # anyio's pytest plugin imports ssl and sockets before conftest could patch them
    ("in-process actors (gevent-patched)", ["-p", "no:anyio", "tests/actors", "tests/integration"],
     {"TROUPE_TEST_GEVENT": "1"}),
    ("units and end-to-end with real peers", ["tests/unit", "tests/e2e"], {}),
)
QUICK_SHARDS = 3  # processes sharing the unit and end-to-end run under --quick (tests/conftest.py)
NO_TESTS = 5  # pytest's exit code when it collected nothing
SUMMARY = re.compile(r"(\d+) (passed|failed|error|errors|skipped)")


def _header(title: str, paths: list[str]) -> str:
    return f"\n===== {title}: {' '.join(p for p in paths if p.startswith('tests'))}"


def _command(paths: list[str], args: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *paths, *args]


def _tally(totals: dict, last_line: str) -> None:
    for n, kind in SUMMARY.findall(last_line):
        totals["failed" if kind in ("failed", "error", "errors") else kind] += int(n)


def _last_line(text: str) -> str:
    return next((line for line in reversed(text.splitlines()) if line.strip()), "")


def _one_by_one(args: list[str], totals: dict) -> list[list[int]]:
    codes = []
    for title, paths, env in RUNS:
        print(_header(title, paths), flush=True)
        proc = subprocess.Popen(_command(paths, args), cwd=ROOT, env={**os.environ, **env},
                                stdout=subprocess.PIPE, text=True)
        last = ""
        for line in proc.stdout:
            sys.stdout.write(line)
            if line.strip():
                last = line
        codes.append([proc.wait()])
        _tally(totals, last)
    return codes


def _all_at_once(args: list[str], totals: dict) -> list[list[int]]:
    started = []  # (run index, title, paths, process, output file)
    for index, (title, paths, env) in enumerate(RUNS):
        shards = QUICK_SHARDS if index == len(RUNS) - 1 else 1
        for shard in range(shards):
            extra = {"TROUPE_TEST_SHARD": f"{shard}/{shards}"} if shards > 1 else {}
            name = f"{title}, shard {shard + 1}/{shards}" if shards > 1 else title
            out = tempfile.TemporaryFile("w+")  # a file, not a pipe: no run can block on its output
            proc = subprocess.Popen(_command(paths, args), cwd=ROOT, env={**os.environ, **env, **extra},
                                    stdout=out, stderr=subprocess.STDOUT, text=True)
            started.append((index, name, paths, proc, out))
    codes: list[list[int]] = [[] for _ in RUNS]
    waiting = list(started)
    while waiting:
        for item in [w for w in waiting if w[3].poll() is not None]:
            index, name, paths, proc, out = item
            waiting.remove(item)
            out.seek(0)
            text = out.read()
            out.close()
            print(_header(name, paths), flush=True)
            sys.stdout.write(text)
            sys.stdout.flush()
            codes[index].append(proc.returncode)
            _tally(totals, _last_line(text))
        time.sleep(0.2)
    return codes


# Static checks the test command runs first, each counted as one test: ruff (ruff.toml)
# and pyright in basic mode (pyrightconfig.json). A missing tool is a failure, not a skip.
CHECKS = (("ruff", [sys.executable, "-m", "ruff", "check", "."]),
          ("pyright (basic)", [sys.executable, "-m", "pyright"]))


def _checks(totals: dict) -> int:
    worst = 0
    for title, command in CHECKS:
        print(f"\n===== {title}: {' '.join(command[2:])}", flush=True)
        proc = subprocess.run(command, cwd=ROOT, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sys.stdout.write(proc.stdout)
        key = "passed" if proc.returncode == 0 else "failed"
        totals[key] += 1
        worst = worst or proc.returncode
    return worst


def main() -> int:
    args = sys.argv[1:]
    quick = "--quick" in args
    if quick:
        args.remove("--quick")
        args = ["-m", "not slow", *args]  # first, so a -m of the caller's own still wins
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    worst = _checks(totals)
    codes = _all_at_once(args, totals) if quick else _one_by_one(args, totals)
    for run in codes:
        if all(code == NO_TESTS for code in run):  # a suite that must have tests collected none
            totals["failed"] += 1
            worst = worst or 1
        worst = worst or next((code for code in run if code not in (0, NO_TESTS)), 0)
    print(f"\ntotal: {totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 1 if worst or totals["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
