"""Section 8 of scripts/bench.py: what operating troupe costs a call (issue 29). One tools/call through
troupe's stdio front in front of the fast stdio backend, with nothing on, with the audit trail on
(`audit.file`), with OpenTelemetry traces on (`telemetry.otlp_endpoint`, to a local OTLP/HTTP sink
that takes every export and discards it) and with a rate limit that never refuses (`serve.rate`, the
anonymous bucket), all in one run, interleaved, against a direct call of the same backend.

Each feature's cost is the p50 it adds over troupe with nothing on, as a ratio to troupe's own added
p50 (troupe with nothing on minus the direct call); the goal of issue 29: each under 10%.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import urllib.request
from pathlib import Path

import yaml
from _bench_latency import _interleaved
from _bench_paths import bench_backend, stdio_entry, troupe_config, troupe_stdio
from _bench_report import Report
from _bench_rpc import LOGS, StdioRpc

GOAL = 0.10  # each feature adds at most this share of troupe's own added p50
ROUNDS_FACTOR = 8
DIRECT, PLAIN, AUDIT, TRACES, TRACED_CLIENT, RATE = (
    "direct stdio", "troupe, nothing on", "troupe + audit trail", "troupe + traces",
    "troupe + traces, client's traceparent", "troupe + rate limit")
# A tracing client's context, sent with each call of TRACED_CLIENT: troupe's spans join its trace.
CLIENT_TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _with(config, extra: dict, label: str):
    data = yaml.safe_load(config.read_text())
    for key, value in extra.items():
        data.setdefault(key, {}).update(value)
    path = LOGS / f"troupe-ops-{label}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def run(settings, report: Report) -> dict:
    print("\n== 8. operations: audit trail, traces and rate limits against troupe with nothing on", flush=True)
    section = "8 operations [bench_backend]"
    backend = bench_backend()
    tool, arguments = backend.tool, backend.arguments
    plain = troupe_config("ops", [stdio_entry("b", backend, prefix="")])
    # the collector in a process of its own, as a real one is (scripts/_bench_otlp_sink.py says why)
    sink = subprocess.Popen([sys.executable, str(Path(__file__).with_name("_bench_otlp_sink.py"))],
                            stdout=subprocess.PIPE, text=True)
    assert sink.stdout is not None
    endpoint = f"http://127.0.0.1:{int(sink.stdout.readline())}"
    configs = {
        PLAIN: plain,
        AUDIT: _with(plain, {"audit": {"file": str(LOGS / "ops-audit.jsonl")}}, "audit"),
        TRACES: _with(plain, {"telemetry": {"otlp_endpoint": endpoint, "service_name": "troupe-bench"}}, "traces"),
        TRACED_CLIENT: _with(plain, {"telemetry": {"otlp_endpoint": endpoint, "service_name": "troupe-bench"}},
                             "traced-client"),
        RATE: _with(plain, {"serve": {"rate": {"per_minute": 10_000_000, "burst": 1_000_000}}}, "rate"),
    }
    try:
        with contextlib.ExitStack() as stack:
            clients = {DIRECT: StdioRpc(list(backend.cmd), label="direct-ops")}
            for name, config in configs.items():
                clients[name] = troupe_stdio(f"ops-{config.stem.removeprefix('troupe-ops-')}", config)
            for client in clients.values():
                stack.enter_context(client)
                client.initialize()
            for name, client in clients.items():
                if name != DIRECT:
                    client.list_tools()  # troupe's first list waits for its backend
            paths = {name: (lambda c=c: c.call(tool, arguments)) for name, c in clients.items()}
            traced_call = {"name": tool, "arguments": arguments, "_meta": {"traceparent": CLIENT_TRACEPARENT}}
            paths[TRACED_CLIENT] = lambda c=clients[TRACED_CLIENT]: c.request("tools/call", traced_call)
            # differences of a few µs: ROUNDS_FACTOR times the usual rounds, so noise is not read as cost
            latency = _interleaved(paths, settings.latency_rounds * ROUNDS_FACTOR, settings.latency_block,
                                   settings.latency_warmup,
                                   cpu_pids={name: c.pid for name, c in clients.items() if name != DIRECT})
        with urllib.request.urlopen(endpoint + "/exports", timeout=10) as resp:
            exports = int(resp.read())
    finally:
        sink.terminate()
        sink.wait(10)
    direct = latency[DIRECT]["p50_ms"]
    added = {name: (f["p50_ms"] - direct) * 1000.0 for name, f in latency.items()}  # µs
    own = max(added[PLAIN], 1e-6)
    report.row(section, DIRECT, f"p50 {direct * 1000:.0f} µs", "baseline")
    cpu = {name: latency[name]["cpu_ms_per_call"] * 1000.0 for name in configs}  # µs of troupe's CPU per call
    p99 = {name: latency[name]["p99_ms"] * 1000.0 for name in configs}
    report.row(section, PLAIN, f"+{added[PLAIN]:.0f} µs p50", "troupe's own added p50")
    report.row(section, "  its CPU per call, p99", f"{cpu[PLAIN]:.0f} µs, p99 {p99[PLAIN]:.0f} µs", "")
    goals = {}
    for name in (AUDIT, TRACES, TRACED_CLIENT, RATE):
        cost = added[name] - added[PLAIN]
        share = cost / own
        met = share <= GOAL
        goals[name] = {"added_us": cost, "share_of_troupe": share, "met": met,
                       "cpu_added_us": cpu[name] - cpu[PLAIN], "p99_us": p99[name]}
        report.row(section, name, f"+{added[name]:.0f} µs p50 ({cost:+.0f} µs)",
                   f"{share:.2f}× troupe's own", f"<= {GOAL:g}×", met)
        report.row(section, "  its CPU per call, p99",
                   f"{cpu[name]:.0f} µs ({cpu[name] - cpu[PLAIN]:+.0f}), p99 {p99[name]:.0f} µs", "")
    report.row(section, "  OTLP exports the sink took", str(exports), "")
    return {"latency": latency, "added_p50_us": added, "goals": goals, "otlp_exports": exports}
