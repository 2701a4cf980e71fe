#!/usr/bin/env python
"""Measure a tools/list_changed storm (issue 26, item 2): what it costs upstream and what it does
to another server's calls, as ratios to a calm run in the same process.

troupe serves over Streamable HTTP in front of two stdio servers: tests/servers/storm with 2,000
synthetic tools whose descriptions change before each notification, and bench_backend (echo).
One client times echo calls before each storm (its calm baseline), during it and a few seconds
after it.

Storms:
  paced   8,000 notifications over 10 s (the issue's 7,881 in 10 s), a new list before each one
  burst   8,000 notifications as fast as the server writes them, a new list before each one
  same    8,000 notifications as fast as possible, the list never changing

Figures per storm: re-lists the server served (and troupe's `relists` in /status) per
notification; echo p50 during the storm and after it over the calm p50 (target <= 1.5x); the
time until troupe's catalogue shows the storm's last list.

Usage:
  python scripts/bench_storm.py              # about a minute
  python scripts/bench_storm.py --quick      # smoke run: small storms, seconds
  python scripts/bench_storm.py --out storm.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file

from _bench_paths import Backend, bench_backend, http_client, stdio_entry, troupe_config, troupe_http  # noqa: E402
from _bench_report import Report, ms, ratio  # noqa: E402
from _bench_rpc import LOGS, PYTHON, BenchError, stop_all, time_calls  # noqa: E402

SLOWER_TARGET = 1.5  # another server's p50 during and after a storm, over its calm p50
RELIST_TARGET = 0.05  # re-lists per notification of a storm sent at once


@dataclass(frozen=True)
class Settings:
    tools: int = 2000
    count: int = 8000
    paced_seconds: float = 10.0
    calm_calls: int = 2000
    warmup: int = 200
    after_wait: float = 5.0  # the issue measured 5 s after the storm
    after_calls: int = 1000


QUICK = Settings(tools=500, count=1000, paced_seconds=2.0, calm_calls=200, warmup=20, after_wait=0.5,
                 after_calls=100)


def _text(reply: dict) -> str:
    return reply["content"][0]["text"]


def _status(base: str, name: str) -> dict:
    with urllib.request.urlopen(base + "/status", timeout=10) as resp:
        return next(s for s in json.load(resp)["servers"] if s["name"] == name)


def _timed_during(client, fn, until, at_least: int = 20) -> dict:
    """echo calls back to back until until() (and at least at_least of them): their percentiles."""
    samples = []
    while len(samples) < at_least or not until():
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    s = sorted(samples)
    return {"p50_ms": s[len(s) // 2] * 1000, "p99_ms": s[min(len(s) - 1, int(0.99 * len(s)))] * 1000, "n": len(s)}


def _storm(client, base: str, settings: Settings, echo, label: str, seconds: float, change: bool) -> dict:
    lists = lambda: orjson.loads(_text(client.call("storm__lists", {})))  # noqa: E731
    # Each storm's calm p50 just before it: the load of a shared machine drifts within a minute.
    calm = time_calls(echo, settings.calm_calls, settings.warmup)
    before, relists_before = lists(), _status(base, "storm")["relists"]
    started = time.monotonic()
    client.call("storm__storm", {"count": settings.count, "seconds": seconds, "change": change})
    sent = lambda: lists()["sent"] >= before["sent"] + settings.count  # noqa: E731
    during = _timed_during(client, echo, sent)
    storm_s = time.monotonic() - started
    version = lists()["version"]
    wanted = f"Storm tool 0, version {version}."
    deadline = time.monotonic() + 60
    while True:
        try:
            tool = next((t for t in client.list_tools() if t["name"] == "storm__s0000"), None)
        except BenchError as exc:  # the catalogue moved between two pages: list again
            if "stale cursor" not in str(exc):
                raise
            tool = None
        if tool is not None and tool.get("description") == wanted:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"{label}: the catalogue never showed version {version}")
        time.sleep(0.05)
    latest_s = time.monotonic() - started - storm_s
    time.sleep(settings.after_wait)
    after = time_calls(echo, settings.after_calls, 0)
    served = lists()["relists"] - before["relists"]
    counted = _status(base, "storm")["relists"] - relists_before
    return {"notifications": settings.count, "storm_s": storm_s, "relists_served": served, "relists_counted": counted,
            "calm": calm, "during": during, "after": after, "latest_listed_after_s": latest_s}


def run(settings: Settings, report: Report) -> dict:
    section = f"storm [{settings.tools:,} tools]"
    storm = Backend("storm", (PYTHON, "-m", "tests.servers.storm", "--tools", str(settings.tools)), "storm")
    servers = [{**stdio_entry("storm", storm), "pin": False}, stdio_entry("echo", bench_backend())]
    proc, url = troupe_http("storm", troupe_config("storm", servers))
    base = url.removesuffix("/mcp")
    try:
        client = http_client(url)
        echo = lambda: client.call("echo__echo", {"text": "hello"})  # noqa: E731
        out: dict = {}
        for label, seconds, change in (("paced", settings.paced_seconds, True), ("burst", 0.0, True),
                                       ("same", 0.0, False)):
            print(f"\n== storm {label}: {settings.count} list_changed"
                  f"{f' over {seconds:g} s' if seconds else ' at once'}{', changing' if change else ''}", flush=True)
            fig = out[label] = _storm(client, base, settings, echo, label, seconds, change)
            per, calm = fig["relists_served"] / fig["notifications"], fig["calm"]
            report.row(section, f"{label}: calm echo p50 before", ms(calm["p50_ms"]), "1.00x (baseline)")
            target = RELIST_TARGET if not seconds else None
            report.row(section, f"{label}: re-lists per notification",
                       f"{fig['relists_served']} / {fig['notifications']} (troupe counted {fig['relists_counted']})",
                       f"{per:.4f}", f"<= {RELIST_TARGET}" if target else "~1 per round trip",
                       per <= RELIST_TARGET if target else None)
            for when in ("during", "after"):
                slower = ratio(fig[when]["p50_ms"], calm["p50_ms"])
                report.row(section, f"{label}: echo p50 {when}", ms(fig[when]["p50_ms"]), f"{slower:.2f}x",
                           f"<= {SLOWER_TARGET}x", slower <= SLOWER_TARGET)
            report.row(section, f"{label}: latest list shown", f"{fig['latest_listed_after_s'] * 1000:.0f} ms "
                       "after the storm")
        client.close()
        return out
    finally:
        proc.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--quick", action="store_true", help="smoke run: small storms")
    p.add_argument("--out", default="bench-storm.json", help="JSON file for every figure")
    args = p.parse_args(argv)
    settings = QUICK if args.quick else Settings()
    report = Report()
    print(f"list_changed storm benchmark ({'quick' if args.quick else 'full'}); load average "
          f"{report.load_at_start[0]:.2f}; child logs in {LOGS}", flush=True)
    try:
        report.sections["storm"] = run(settings, report)
    finally:
        stop_all()
    print("\n" + report.table())
    Path(args.out).write_bytes(orjson.dumps(report.as_json({**vars(args), "settings": asdict(settings)}),
                                            option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    print(f"\nfigures written to {args.out}")
    return 0 if all(r.met is not False for r in report.rows) else 1


if __name__ == "__main__":
    sys.exit(main())
