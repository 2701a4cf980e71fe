"""scripts/bench.py --quick keeps working: every section yields numeric, positive figures (never judged as timings),
the modern (2026-07-28) HTTP path among them."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import orjson
import pytest

from tests.support import ROOT, peer_bin

pytestmark = pytest.mark.slow  # runs scripts/bench.py end to end (~90 s)

SECTIONS = ("latency", "throughput", "cold_start", "meta_tools", "memory", "cluster", "on_demand")


def _positive(value, where: str) -> None:
    assert isinstance(value, (int, float)) and not isinstance(value, bool), f"{where}: not a number: {value!r}"
    assert value > 0, f"{where}: not positive: {value!r}"


def _modern_measured(paths: dict, era: dict, where: str, names: tuple, ratios: tuple) -> None:
    """The modern HTTP path was measured beside the legacy one: troupe's CPU per call for both, and
    every modern/legacy ratio with its target and verdict (never judged: a quick run is all noise)."""
    for name in names:
        assert name in paths, f"{where}: no path {name!r} in {sorted(paths)}"
        _positive(paths[name]["cpu_ms_per_call"], f"{where} {name} CPU per call")
    for key in ratios:
        _positive(era["ratios"][key], f"{where} modern/legacy {key}")
        assert isinstance(era["met"][key], bool), f"{where} modern/legacy {key}: {era['met']}"
    assert era["target"] == 1.0, era


def _goals_judged(goals: dict, where: str) -> None:
    """Every goal of the section came out as a verdict (PASS or MISS; not judged here: a quick run is noise)."""
    assert goals, where
    for name, goal in goals.items():
        assert isinstance(goal["met"], bool), f"{where} goal {name}: {goal}"


def _bench_children(logs_dir: str) -> list[str]:
    """Processes still running whose command line points into this run's log directory."""
    left = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if logs_dir in cmdline:
                left.append(f"{entry}: {cmdline[:200]}")
    return left


def test_quick_bench_writes_every_section(tmp_path):
    peer_bin("mcp-server-everything")  # sections 1 and 2 use it; CI installs it
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "scripts/bench.py", "--quick", "--out", str(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=180)
    tail = (proc.stdout[-4000:] + "\n--- stderr ---\n" + proc.stderr[-4000:])
    assert proc.returncode == 0, tail
    logs = re.search(r"child logs in (\S+)", proc.stdout)
    assert logs, tail
    assert _bench_children(logs.group(1)) == [], "bench left processes running"
    data = orjson.loads(out.read_bytes())
    sections = data["sections"]
    for name in SECTIONS:
        assert name in sections and "error" not in sections[name], f"section {name}: {sections.get(name)}"

    assert sections["latency"]["backends"]
    for backend, result in sections["latency"]["backends"].items():
        assert result["paths"], backend
        for path, fig in result["paths"].items():
            for key in ("p50_ms", "p99_ms"):
                _positive(fig[key], f"latency {backend} {path} {key}")
        for key, value in result["ratios"].items():
            _positive(value, f"latency {backend} ratio {key}")
        _modern_measured(result["paths"], result["modern_vs_legacy_http"], f"latency {backend}",
                         ("troupe HTTP→stdio", "troupe HTTP→stdio (modern)"), ("added_p50", "cpu_per_call"))

    throughput = sections["throughput"]
    for group in (throughput["paths"], throughput["stdio_backend"]["paths"]):
        for path, fig in group.items():
            _positive(fig["calls_per_s"], f"throughput {path}")
    for key, value in throughput["ratios"].items():
        _positive(value, f"throughput ratio {key}")
    _modern_measured(throughput["paths"], throughput["modern_vs_legacy"], "throughput [server-everything]",
                     ("troupe HTTP→HTTP", "troupe HTTP→HTTP (modern)"), ("calls_per_s", "cpu_per_call"))
    ceiling = throughput["stdio_backend"]
    _modern_measured(ceiling["paths"], ceiling["modern_vs_legacy"], "throughput [bench_backend]",
                     ("troupe HTTP→stdio", "troupe HTTP→stdio (modern)"), ("calls_per_s", "cpu_per_call"))

    cluster = sections["cluster"]  # the hop to a server's owner, and three instances against one
    for key in ("local", "relayed"):
        _positive(cluster["hop"][key]["p50_ms"], f"cluster hop {key}")
    _positive(cluster["hop"]["ratio_p50"], "cluster hop ratio")
    for path, fig in cluster["scale"]["paths"].items():
        _positive(fig["calls_per_s"], f"cluster {path}")
    _positive(cluster["scale"]["ratio_3_vs_1"], "cluster 3 vs 1")

    cold = sections["cold_start"]
    assert cold["troupe"], cold
    for n, fig in cold["troupe"].items():
        for key in ("initialize_s", "listed_s", "callable_s"):
            _positive(fig[key], f"cold start troupe N={n} {key}")
        _positive(cold["spawn_floor"][n], f"cold start spawn floor N={n}")
    for n, fig in cold["fastmcp"].items():
        # The peer may be capped by its time budget; then it says so instead of giving a figure.
        assert "callable_s" in fig or "capped" in fig or "skipped" in fig, fig
        if "callable_s" in fig:
            _positive(fig["callable_s"], f"cold start FastMCP N={n}")

    _goals_judged(cold["goals"], "cold start")
    peer = cold["mcp_proxy"]  # the peer figure, or a plain word that it is not installed
    assert "missing" in peer or all(peer["1"][key] > 0 for key in ("initialize_s", "listed_s", "callable_s")), peer

    meta = sections["meta_tools"]
    assert meta["catalogue"] >= 200
    _positive(meta["first_filter_s"], "first filter_tools")
    for path, fig in meta["paths"].items():
        _positive(fig["p50_ms"], f"meta-tools {path}")

    memory = sections["memory"]
    for n, kib in memory["rss_kib"].items():
        _positive(kib, f"RSS with {n} backends")
    assert isinstance(memory["per_backend_kib"], (int, float))
    _goals_judged(memory["goals"], "memory")
    if memory["mcp_proxy_rss_kib"] is None:  # no baseline: the goal that needs it is never passed
        assert memory["goals"]["vs_mcp_proxy"]["met"] is False, memory["goals"]
    else:
        _positive(memory["mcp_proxy_rss_kib"], "mcp-proxy RSS")

    on_demand = sections["on_demand"]  # servers on demand: RSS always on vs at rest, the first call
    for key, value in on_demand["rss_bytes"].items():
        _positive(value, f"on demand RSS {key}")
    for backend, fig in on_demand["first_call"].items():
        for key, value in fig["p50_s"].items():
            _positive(value, f"on demand {backend} {key}")

    assert data["rows"] and all(row["figure"] or row["ratio"] for row in data["rows"])
