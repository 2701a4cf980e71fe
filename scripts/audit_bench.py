#!/usr/bin/env python
"""What the audit trail costs a call, in one run: tools/call p50 to tests/servers/bench_backend three
ways, rounds alternating so a busy machine slows them alike:

  direct     the backend alone (stdio), the floor
  audit off  troupe (stdio in, stdio out) in front of it, no `audit:` section
  audit on   the same with `audit.file` (a line per call, written by its writer greenlet)

Prints each p50, troupe's own added latency (off − direct), what the audit trail adds to it
(on − off) and that as a share of troupe's own (issue 29's goal: under 10%), and the file's figures.

Usage: python scripts/audit_bench.py [--calls 3000] [--rounds 6] [--out audit-bench.json]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file

from _bench_paths import bench_backend, stdio_entry, troupe_config, troupe_stdio  # noqa: E402
from _bench_rpc import LOGS, StdioRpc, percentiles, stop_all  # noqa: E402

GOAL = 0.10  # the audit trail's added p50, as a share of troupe's own added p50


def _with_audit(config: Path, audit_file: Path) -> Path:
    data = yaml.safe_load(config.read_text())
    data["audit"] = {"file": str(audit_file)}
    config.write_text(yaml.safe_dump(data))
    return config


def measure(calls: int, rounds: int) -> dict:
    backend = bench_backend()
    audit_file = LOGS / "audit.jsonl"
    direct = StdioRpc(list(backend.cmd), label="direct")
    off = troupe_stdio("audit-off", troupe_config("audit-off", [stdio_entry("b", backend, prefix="")]))
    on = troupe_stdio("audit-on", _with_audit(troupe_config("audit-on", [stdio_entry("b", backend, prefix="")]),
                                               audit_file))
    try:
        for rpc in (direct, off, on):
            rpc.initialize()
            rpc.list_tools()
        ways = {"direct": direct, "audit off": off, "audit on": on}
        samples: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(calls // 5):  # warm-up
            for rpc in ways.values():
                rpc.call(backend.tool, backend.arguments)
        for _ in range(rounds):
            for way, rpc in ways.items():
                for _ in range(calls // rounds):
                    t0 = time.perf_counter()
                    rpc.call(backend.tool, backend.arguments)
                    samples[way].append(time.perf_counter() - t0)
        status = orjson.loads(on.call("core_status", {})["content"][0]["text"])["audit"]
        return {"figures": {way: percentiles(s) for way, s in samples.items()}, "audit": status}
    finally:
        for rpc in (direct, off, on):
            rpc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per way, over all rounds")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", default="audit-bench.json")
    args = parser.parse_args(argv)
    try:
        result = measure(args.calls, args.rounds)
    finally:
        stop_all()
    f = result["figures"]
    direct, off, on = (f[w]["p50_ms"] for w in ("direct", "audit off", "audit on"))
    print(f"{'way':<10} {'p50 ms':>8} {'p99 ms':>8}")
    for way, fig in f.items():
        print(f"{way:<10} {fig['p50_ms']:>8.3f} {fig['p99_ms']:>8.3f}")
    own, added = off - direct, on - off
    share = added / own if own > 0 else float("inf")
    print(f"troupe's own added p50 {own:.3f} ms; the audit trail adds {added:+.3f} ms: {share:.1%} of it "
          f"(goal < {GOAL:.0%}: {'PASS' if share < GOAL else 'MISS'}); on/off p50 {on / off:.3f}×")
    print("audit after the run:", {k: result["audit"][k] for k in ("written", "dropped", "failed", "rotations")})
    result["summary"] = {"own_added_ms": own, "audit_added_ms": added, "share": share, "goal": GOAL}
    Path(args.out).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
