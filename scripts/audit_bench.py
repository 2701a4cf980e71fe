#!/usr/bin/env python
"""What the audit trail costs a call, in one run: tools/call p50 to tests/servers/bench_backend three
ways, rounds alternating so a busy machine slows them alike:

  direct     the backend alone (stdio), the floor
  audit off  troupe (stdio in, stdio out) in front of it, no `audit:` section
  audit on   the same with `audit.file` (a line per call, written by its writer greenlet)

Two troupe processes with the same config differ by tens of µs at p50 on this machine (where each
lands, what else runs), more than the audit trail costs: so `--pairs` fresh off/on pairs are
measured and each way's figure is the median of its processes' p50s. The hook's own cost (begin,
end, queue, and the writer's encoding) is also timed in process, where that noise does not reach.

Prints each p50, troupe's own added latency (off − direct), what the audit trail adds to it
(on − off) and that as a share of troupe's own (issue 29's goal: under 10%), and the file's figures.

Usage: python scripts/audit_bench.py [--calls 3000] [--rounds 6] [--pairs 3] [--out audit-bench.json]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # actors, for the in-process timing

from _bench_paths import bench_backend, stdio_entry, troupe_config, troupe_stdio  # noqa: E402
from _bench_rpc import LOGS, StdioRpc, percentiles, stop_all  # noqa: E402

GOAL = 0.10  # the audit trail's added p50, as a share of troupe's own added p50


def _with_audit(config: Path, audit_file: Path) -> Path:
    data = yaml.safe_load(config.read_text())
    data["audit"] = {"file": str(audit_file)}
    config.write_text(yaml.safe_dump(data))
    return config


def measure_pair(label: str, calls: int, rounds: int) -> dict:
    """One direct backend, one troupe without and one with the audit trail: p50s, rounds alternating."""
    backend = bench_backend()
    audit_file = LOGS / f"audit-{label}.jsonl"
    direct = StdioRpc(list(backend.cmd), label=f"direct-{label}")
    off = troupe_stdio(f"off-{label}", troupe_config(f"off-{label}", [stdio_entry("b", backend, prefix="")]))
    on = troupe_stdio(f"on-{label}", _with_audit(troupe_config(f"on-{label}", [stdio_entry("b", backend, prefix="")]),
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


def hook_cost_us(n: int = 50_000) -> dict:
    """The audit trail's work per call, timed in this process: a call's begin and end with the
    record queued (the call path's part), and the writer's encoding of it (off the call path)."""
    from actors.ops.audit_file import AuditFile
    from actors.ops.observer import Observer
    from actors.ops.records import CallRecord
    from actors.ops.writer import AuditWriter
    writer = AuditWriter(AuditFile(str(LOGS / "hook.jsonl"), 1 << 30, 1), queue_max=n + 1)
    side = Observer(lambda: None, (writer.offer,)).session("stdio", None, None)
    params, result = {"name": "echo", "arguments": {"text": "hello"}}, {"content": [{"type": "text", "text": "hi"}]}

    def call() -> None:
        side.answered(side.begin("tools/call", "b", params, print), result)
    record = CallRecord(time.time(), None, None, None, "stdio", "legacy", "tools/call", "b", "echo", "0" * 64, "ok",
                        None, 0.1)
    return {"call_path_us": timeit.timeit(call, number=n) / n * 1e6,
            "encode_us": timeit.timeit(lambda: orjson.dumps(record.to_json()) + b"\n", number=n) / n * 1e6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per way and pair, over all rounds")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--pairs", type=int, default=3, help="fresh off/on troupe pairs (the median is taken)")
    parser.add_argument("--out", default="audit-bench.json")
    args = parser.parse_args(argv)
    try:
        pairs = [measure_pair(str(i), args.calls, args.rounds) for i in range(args.pairs)]
    finally:
        stop_all()
    hook = hook_cost_us()
    ways = ("direct", "audit off", "audit on")
    print(f"{'way':<10} {'median p50 ms':>14}   p50 of each pair (ms)")
    median = {}
    for way in ways:
        p50s = [p["figures"][way]["p50_ms"] for p in pairs]
        median[way] = statistics.median(p50s)
        print(f"{way:<10} {median[way]:>14.3f}   {', '.join(f'{v:.3f}' for v in p50s)}")
    direct, off, on = (median[w] for w in ways)
    own, added = off - direct, on - off
    share = added / own if own > 0 else float("inf")
    print(f"troupe's own added p50 {own * 1000:.1f} µs; the audit trail adds {added * 1000:+.1f} µs across processes: "
          f"{share:.1%} of it (goal < {GOAL:.0%}: {'PASS' if share < GOAL else 'MISS'}); on/off p50 {on / off:.3f}×")
    in_process = hook["call_path_us"] / (own * 1000) if own > 0 else float("inf")
    print(f"in process: the call path's audit work {hook['call_path_us']:.1f} µs a call ({in_process:.1%} of troupe's "
          f"own added p50), the writer's encoding {hook['encode_us']:.1f} µs a record, off the call path")
    print("audit after the last pair:", {k: pairs[-1]["audit"][k] for k in ("written", "dropped", "failed")})
    result = {"pairs": pairs, "median_p50_ms": median, "hook_us": hook,
              "summary": {"own_added_ms": own, "audit_added_ms": added, "share": share,
                          "in_process_share": in_process, "goal": GOAL}}
    Path(args.out).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
