#!/usr/bin/env python
"""What the response cache costs and saves, in one run: tools/call p50 through troupe (stdio in,
stdio out) to the same read-only tool of the same backend (tests/servers/cached.py), three ways:

  uncached  a server without `cache:` (the call goes straight to the Connection, as before)
  miss      a cached server, new arguments every call (lookup hop to the CacheKeeper, forward, store)
  hit       a cached server, the same arguments every call (lookup hop, answered from the cache)

Rounds alternate the three, so a machine busy with other work slows
them alike; every figure is printed with its ratio to `uncached` from the same run.

Usage: python scripts/cache_bench.py [--calls 2000] [--rounds 5] [--out cache-bench.json]
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file

from _bench_paths import troupe_config, troupe_stdio  # noqa: E402
from _bench_rpc import PYTHON, ROOT, percentiles, stop_all  # noqa: E402


def entry(name: str, cache: dict | None) -> dict:
    server = {"name": name, "timeout": 60, "pin": False,
              "transport": {"type": "stdio", "stdio": {"command": PYTHON, "args": ["-m", "tests.servers.cached"],
                                                       "work_dir": str(ROOT)}}}
    if cache is not None:
        server["cache"] = cache
    return server


def measure(calls: int, rounds: int) -> dict:
    rpc = troupe_stdio("cache", troupe_config("cache", [entry("plain", None), entry("c", {"ttl": 3600})]))
    try:
        rpc.initialize()
        rpc.list_tools()
        fresh = itertools.count()
        ways = {
            "uncached": lambda: rpc.call("plain__lookup", {"key": "same"}),
            "miss": lambda: rpc.call("c__lookup", {"key": f"k{next(fresh)}"}),
            "hit": lambda: rpc.call("c__lookup", {"key": "same"}),
        }
        answer = ways["hit"]()
        answer = ways["hit"]()
        assert answer["_meta"]["troupe/cache"]["hit"] is True, answer  # the hit path is the hit path
        samples: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(3 * calls // 10):  # warm-up
            for fn in ways.values():
                fn()
        for _ in range(rounds):
            for way, fn in ways.items():
                for _ in range(calls // rounds):
                    t0 = time.perf_counter()
                    fn()
                    samples[way].append(time.perf_counter() - t0)
        status = orjson.loads(rpc.call("core_status", {})["content"][0]["text"])["cache"]
        return {"figures": {way: percentiles(s) for way, s in samples.items()},
                "cache": {k: status[k] for k in ("hits", "misses", "stores", "entries", "bytes")}}
    finally:
        rpc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per way, over all rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="cache-bench.json")
    args = parser.parse_args(argv)
    try:
        result = measure(args.calls, args.rounds)
    finally:
        stop_all()
    figures = result["figures"]
    base = figures["uncached"]["p50_ms"]
    print(f"{'way':<10} {'p50 ms':>8} {'p99 ms':>8} {'vs uncached':>12} {'added ms':>9}")
    for way, f in figures.items():
        print(f"{way:<10} {f['p50_ms']:>8.3f} {f['p99_ms']:>8.3f} {f['p50_ms'] / base:>11.2f}× "
              f"{f['p50_ms'] - base:>+9.3f}")
    print("cache after the run:", result["cache"])
    Path(args.out).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
