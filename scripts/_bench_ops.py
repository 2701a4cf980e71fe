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
import http.server
import threading

import yaml
from _bench_latency import _interleaved
from _bench_paths import bench_backend, stdio_entry, troupe_config, troupe_stdio
from _bench_report import Report
from _bench_rpc import LOGS, StdioRpc

GOAL = 0.10  # each feature adds at most this share of troupe's own added p50
ROUNDS_FACTOR = 8
DIRECT, PLAIN, AUDIT, TRACES, RATE = ("direct stdio", "troupe, nothing on", "troupe + audit trail",
                                      "troupe + traces", "troupe + rate limit")


class _Sink(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP collector that takes every export and keeps nothing (it counts the exports)."""

    exports = 0

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).exports += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


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
    sink = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{sink.server_address[1]}"
    configs = {
        PLAIN: plain,
        AUDIT: _with(plain, {"audit": {"file": str(LOGS / "ops-audit.jsonl")}}, "audit"),
        TRACES: _with(plain, {"telemetry": {"otlp_endpoint": endpoint, "service_name": "troupe-bench"}}, "traces"),
        RATE: _with(plain, {"serve": {"rate": {"per_minute": 10_000_000, "burst": 1_000_000}}}, "rate"),
    }
    try:
        with contextlib.ExitStack() as stack:
            clients = {DIRECT: StdioRpc(list(backend.cmd), label="direct-ops")}
            for name, config in configs.items():
                clients[name] = troupe_stdio(f"ops-{name.split()[-1]}", config)
            for client in clients.values():
                stack.enter_context(client)
                client.initialize()
            for name, client in clients.items():
                if name != DIRECT:
                    client.list_tools()  # troupe's first list waits for its backend
            paths = {name: (lambda c=c: c.call(tool, arguments)) for name, c in clients.items()}
            # differences of a few µs: ROUNDS_FACTOR times the usual rounds, so noise is not read as cost
            latency = _interleaved(paths, settings.latency_rounds * ROUNDS_FACTOR, settings.latency_block,
                                   settings.latency_warmup)
    finally:
        sink.shutdown()
    direct = latency[DIRECT]["p50_ms"]
    added = {name: (f["p50_ms"] - direct) * 1000.0 for name, f in latency.items()}  # µs
    own = max(added[PLAIN], 1e-6)
    report.row(section, DIRECT, f"p50 {direct * 1000:.0f} µs", "baseline")
    report.row(section, PLAIN, f"+{added[PLAIN]:.0f} µs p50", "troupe's own added p50")
    goals = {}
    for name in (AUDIT, TRACES, RATE):
        cost = added[name] - added[PLAIN]
        share = cost / own
        met = share <= GOAL
        goals[name] = {"added_us": cost, "share_of_troupe": share, "met": met}
        report.row(section, name, f"+{added[name]:.0f} µs p50 ({cost:+.0f} µs)",
                   f"{share:.2f}× troupe's own", f"<= {GOAL:g}×", met)
    report.row(section, "  OTLP exports the sink took", str(_Sink.exports), "")
    return {"latency": latency, "added_p50_us": added, "goals": goals, "otlp_exports": _Sink.exports}
