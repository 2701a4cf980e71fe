#!/usr/bin/env python
"""Measure the cost of troupe in the middle, against direct calls and FastMCP's proxy, in one run.

Sections (all in one run, every ratio against a baseline measured in the same run):
  1  tools/call latency at concurrency 1 (p50, p99): direct to the backend; troupe stdio→stdio;
     troupe HTTP→stdio, legacy (a session) and modern (2026-07-28: stateless, `_meta` envelope, routing
     headers); FastMCP's create_proxy over stdio and HTTP. Backends: tests/servers/bench_backend
     (single-threaded Python) and server-everything (Node). Also each aggregator's CPU time per call.
  2  throughput of 32 concurrent callers over Streamable HTTP against server-everything's HTTP server:
     direct vs troupe in front of it (legacy and modern callers) vs the FastMCP proxy in front of it;
     then both aggregators with HTTP in front of bench_backend over stdio, a backend that is never the
     bottleneck (their own ceiling). troupe's CPU time per call in each era.
     Modern vs legacy (issue 15): p50 added and CPU per call <= 1.0×, calls/s >= 1.0×, no noise margin.
  3  cold start: launch until every tool of N stdio backends is callable (N = 1, 10, 50), troupe and
     the FastMCP proxy, plus the floor of launching N backends in parallel with no aggregator, and
     mcp-proxy's first tools/list in front of one. Issue 31's goals (PASS/MISS), on troupe's first
     tools/list: N=1 <= 1.3× the spawn floor + 0.25 s; troupe's own share (listed minus floor) at N=50
     <= 1.3× its share at N=1.
  4  filter_tools and list_tools latency through troupe (meta mode) over a 10,000-tool catalogue.
  5  troupe's own RSS with 1 and 50 connected backends, and the growth per backend, beside mcp-proxy's
     own RSS in front of one. Issue 31's goals: troupe at 50 <= 40 MiB and <= 0.75× mcp-proxy at 1;
     growth < 100 KiB per backend. Before sections 3 and 5, `python -m compileall -q actors tests/servers`
     runs once, so every start reads bytecode as an installed troupe does.
  6  cluster: the hop to a server's owner, and three instances behind HAProxy against one.
  7  the hot path (issue 20): one tools/call through troupe's stdio and HTTP fronts against a bare Python
     relay (bytes only, and parsing JSON), a direct stdio call, a direct HTTP server (tests/servers/bench_http)
     and the FastMCP proxy, all in front of bench_backend: added p50 at concurrency 1, calls/s with 32 in
     flight, and the front's own CPU per call; every goal of the issue as a ratio with PASS/MISS.
  8  operations (issue 29): troupe stdio with the audit trail, OpenTelemetry traces (to a local OTLP sink)
     and a never-refusing rate limit each on, against troupe with nothing on: each one's added p50 as a
     share of troupe's own added latency (goal: under 10%).
  9  servers on demand (issue 30): RSS of troupe plus children with 20 stdio servers always on vs on
     demand at rest, and the first call on a stopped server against a warm call and the server's own
     spawn-and-handshake (goal: first call <= 1.1× spawn-and-handshake + one warm call).

Usage:
  python scripts/bench.py                       # full run (about 3-5 minutes on 2 cores)
  python scripts/bench.py --quick               # smoke run: tiny counts, seconds per section
  python scripts/bench.py --sections 1,4 --out results.json
  python scripts/bench.py --sections 1 --profile bench-profile.txt
      after the sections, attaches `py-spy record` (pip-installed if missing) to a fresh troupe while
      it serves one workload at a time: echo stdio→stdio (bench_backend, server-everything), echo
      HTTP→stdio in each era, then filter_tools and list_tools over the big catalogue.
      Writes, per workload, the share of troupe's busy time by module/library and the top functions by
      own and inclusive time; the collapsed stacks stay in the log directory (open them in speedscope
      or flamegraph.pl).
  python scripts/bench.py --sections "" --profile F --profile-only echo-http-legacy,echo-http-modern
      the profile alone, of those workloads only.

Prints a table (section, path, figure, ratio vs baseline, target, met) and writes every figure to
the JSON file. Children run in their own process groups and are always killed; each child's stderr
is kept in a temporary log directory, printed at the end.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file

import _bench_cluster  # noqa: E402
import _bench_hotpath  # noqa: E402
import _bench_latency  # noqa: E402
import _bench_on_demand  # noqa: E402
import _bench_ops  # noqa: E402
import _bench_profile  # noqa: E402
import _bench_sections  # noqa: E402
import _bench_throughput  # noqa: E402
from _bench_report import Report  # noqa: E402
from _bench_rpc import LOGS, BenchError, stop_all  # noqa: E402


@dataclass(frozen=True)
class Settings:
    """Counts and durations; --quick shrinks every one so a section takes seconds."""

    # 2,000 calls per path, in short blocks rotating over the paths: on a shared machine the load
    # drifts within seconds, and a ratio of two paths (modern/legacy HTTP) is only as fair as the
    # rotation is quick (5 blocks of 400 let one path catch a busy spell the other missed).
    latency_rounds: int = 40
    latency_block: int = 50
    latency_warmup: int = 200
    profile_seconds: float = 10.0
    callers: int = 32
    throughput_seconds: float = 5.0
    throughput_warmup: float = 1.0
    throughput_rounds: int = 2
    cold_ns: tuple = (1, 10, 50)
    cold_reps: int = 5  # troupe and its spawn floor, alternating: section 3 takes the medians
    quiet_wait: float = 5.0  # at most, before each cold run, for the machine to go quiet
    cold_budget: float = 120.0
    fastmcp_cold_max: int = 50
    fastmcp_cold_budget: float = 60.0
    catalogue: int = 10_000
    meta_calls: int = 200
    rss_ns: tuple = (1, 50)
    rss_settle: float = 1.0
    section_timeout: float = 900.0


QUICK = Settings(latency_rounds=4, latency_block=12, latency_warmup=10, profile_seconds=2.0,
                 throughput_seconds=1.5, throughput_warmup=0.3, throughput_rounds=1,
                 cold_ns=(1, 2), cold_reps=1, quiet_wait=0.0, fastmcp_cold_budget=30.0, catalogue=200, meta_calls=20,
                 rss_ns=(1, 2), rss_settle=0.2, section_timeout=120.0)

SECTIONS = {
    "1": ("latency", _bench_latency.run),
    "2": ("throughput", _bench_throughput.throughput),
    "3": ("cold_start", _bench_sections.cold_start),
    "4": ("meta_tools", _bench_sections.meta_tools),
    "5": ("memory", _bench_sections.memory),
    "6": ("cluster", _bench_cluster.cluster),
    "7": ("hot_path", _bench_hotpath.run),
    "8": ("operations", _bench_ops.run),
    "9": ("on_demand", _bench_on_demand.run),
}


class SectionTimeout(BenchError):
    """A whole section ran past its bound (raised by SIGALRM in the main thread)."""


def _alarm(signum, frame):
    raise SectionTimeout("section ran past its time bound")


def _terminate(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=str(__doc__).splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--quick", action="store_true", help="smoke run: tiny counts, seconds per section")
    p.add_argument("--out", default="bench-results.json", help="JSON file for every figure")
    p.add_argument("--sections", default="1,2,3,4,5,6,7,8,9", help="comma-separated section numbers")
    p.add_argument("--profile", nargs="?", const="bench-profile.txt", default=None, metavar="FILE",
                   help="profile troupe (py-spy) during one workload at a time; summary to FILE")
    p.add_argument("--profile-only", default="", metavar="SLUGS",
                   help=f"with --profile, only these workloads (comma-separated: {', '.join(_bench_profile.SLUGS)})")
    args = p.parse_args(argv)
    chosen = [s.strip() for s in args.sections.split(",") if s.strip()]  # "" runs none (a profile alone)
    unknown = [s for s in chosen if s not in SECTIONS]
    if unknown:
        p.error(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}")
    only = tuple(s.strip() for s in args.profile_only.split(",") if s.strip())
    if [s for s in only if s not in _bench_profile.SLUGS]:
        p.error(f"unknown profile workloads {only}; choose from {', '.join(_bench_profile.SLUGS)}")
    settings = QUICK if args.quick else Settings()
    report = Report()
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGTERM, _terminate)
    failed: list[str] = []
    started = time.monotonic()
    print(f"troupe benchmark ({'quick' if args.quick else 'full'}); load average {report.load_at_start[0]:.2f}; "
          f"child logs in {LOGS}", flush=True)
    try:
        for number in chosen:
            key, fn = SECTIONS[number]
            signal.alarm(int(settings.section_timeout))
            t0 = time.monotonic()
            try:
                report.sections[key] = {**fn(settings, report), "elapsed_s": time.monotonic() - t0}
            except Exception as exc:  # one broken section must not hide the others' figures
                failed.append(key)
                report.sections[key] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"  section {number} ({key}) FAILED: {type(exc).__name__}: {exc}", flush=True)
                traceback.print_exc()
            finally:
                signal.alarm(0)
                stop_all()
        if args.profile:
            signal.alarm(int(settings.section_timeout))
            try:
                report.sections["profile"] = _bench_profile.profile(settings, Path(args.profile), report, only)
            finally:
                signal.alarm(0)
                stop_all()
    finally:
        stop_all()
    print("\n" + report.table())
    for note in report.notes:
        print(f"note: {note}")
    print(f"load average at start {report.load_at_start[0]:.2f}, at end {os.getloadavg()[0]:.2f} "
          f"(on {len(os.sched_getaffinity(0))} CPUs; other work on the machine skews every figure)")
    Path(args.out).write_bytes(orjson.dumps(report.as_json({**vars(args), "settings": asdict(settings)}),
                                            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print(f"\nfigures written to {args.out} in {time.monotonic() - started:.1f} s; child logs in {LOGS}")
    if failed:
        print(f"sections failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
