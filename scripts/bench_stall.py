#!/usr/bin/env python
"""Stall benchmark (issue 26, item 3): another client's call latency while one client makes troupe
list 50,000 tools with a 5 MB description, search them, and send batches, as ratios to a calm run.

One troupe over HTTP (meta mode, JSON answers) with two stdio servers: `calm` (tests/servers/echo)
and `big` (tests/servers/many_tools, pin: false). A ticker client calls calm__echo every 100 ms
throughout. Phases, each measured on the ticker's calls made during it:

  calm      nothing else happens (the baseline)
  listing   big__inflate: big re-lists 50,000 tools + one 5 MB description; the catalogue takes it
            (max_tools cuts it to 10,000 by default, --max-tools raises it)
  search    the first filter_tools (builds the search index) and list_tools
  batches   a 10,000-request batch (refused: serve.max_batch), then 100 core_status and 100 tools/list

Usage:
  python scripts/bench_stall.py                  # default limits
  python scripts/bench_stall.py --max-tools 60000
  python scripts/bench_stall.py --out stall.json

Prints, per phase, the ticker's p50 and worst call and their ratios to the calm run.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import orjson
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.* from the repository

from tests.e2e.test_hub_stalls import HUGE_MB, SYNTHETIC, Client, Ticker, _batch, _listed  # noqa: E402
from tests.support import wait_until  # noqa: E402
from tests.support.troupe import TroupeHttp, server, write_config  # noqa: E402

CALM_SECONDS = 3.0


def _figures(latencies: list[float]) -> dict:
    ordered = sorted(latencies)
    return {"calls": len(ordered), "p50_ms": ordered[len(ordered) // 2] * 1000, "worst_ms": ordered[-1] * 1000}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-tools", type=int, default=None, help="big's max_tools (default: troupe's, 10,000)")
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="troupe-bench-stall-"))
    extra = {"max_tools": args.max_tools} if args.max_tools else {}
    t = TroupeHttp(write_config(tmp, [server("calm", "tests.servers.echo"),
                                      server("big", "tests.servers.many_tools", pin=False, **extra)],
                                mode="meta", json_response=True), env={"TROUPE_CONFIG_DIR": str(tmp)})
    phases: dict[str, list[float]] = {}
    try:
        wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["ready"], 30, message="ready")
        other, batcher = Client(t.url), Client(t.url, "2025-03-26")
        ticker = Ticker(t.url)
        wait_until(lambda: len(ticker.latencies) > 5, 20, message="warm-up")

        def phase(name: str, work) -> None:
            first = len(ticker.latencies)
            work()
            wait_until(lambda: len(ticker.latencies) > first, 20, message=f"a call during {name}")
            phases[name] = ticker.latencies[first:]
        phase("calm", lambda: time.sleep(CALM_SECONDS))
        expected = (args.max_tools and min(args.max_tools, SYNTHETIC + 7) or 10_000) + 6

        def listing() -> None:
            other.call("big__inflate", {"synthetic": SYNTHETIC, "huge_mb": HUGE_MB})
            wait_until(lambda: _listed(other) >= expected, 120, interval=0.1, message="the big listing")
        phase("listing", listing)
        phase("search", lambda: (other.tool("filter_tools", {"query": "alpha bravo charlie", "limit": 5}),
                                 other.tool("list_tools", {"limit": 100})))

        def batches() -> None:
            for method, n in (("core_status", 10_000), ("core_status", 100), ("tools/list", 100)):
                batcher.post(_batch(method, n))
        phase("batches", batches)
        ticker.stop()
    finally:
        t.stop()
    calm = _figures(phases["calm"])
    out = {}
    print(f"{'phase':<10} {'calls':>5} {'p50 ms':>8} {'worst ms':>9} {'p50 ×calm':>10} {'worst ×calm':>12}")
    for name, latencies in phases.items():
        f = _figures(latencies)
        f["p50_ratio"], f["worst_ratio"] = f["p50_ms"] / calm["p50_ms"], f["worst_ms"] / calm["worst_ms"]
        out[name] = f
        print(f"{name:<10} {f['calls']:>5} {f['p50_ms']:>8.1f} {f['worst_ms']:>9.1f} {f['p50_ratio']:>10.2f} "
              f"{f['worst_ratio']:>12.2f}")
    if args.out:
        Path(args.out).write_bytes(orjson.dumps(out, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
