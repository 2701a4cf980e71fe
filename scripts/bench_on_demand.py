#!/usr/bin/env python
"""Servers on demand, measured (section 9 of scripts/bench.py on its own): RSS of troupe plus its
children with 20 stdio servers always on vs on demand at rest, and the first call's latency on a
stopped server as a ratio to a warm call and to the server's own spawn-and-handshake time.

Usage: python scripts/bench_on_demand.py [--quick] [--out FILE]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _bench_on_demand  # noqa: E402
from _bench_report import Report  # noqa: E402
from _bench_rpc import LOGS, stop_all  # noqa: E402
from bench import QUICK, Settings  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repetitions")
    p.add_argument("--out", default="bench-on-demand.json")
    args = p.parse_args(argv)
    report = Report()
    try:
        figures = _bench_on_demand.run(QUICK if args.quick else Settings(), report)
    finally:
        stop_all()
    print("\n" + report.table())
    Path(args.out).write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    print(f"figures written to {args.out}; child logs in {LOGS}")
    return 0 if all(f["met"] for f in figures["first_call"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
