"""Section 7 of scripts/bench.py: the hot path (issue 20). One tools/call through troupe against a bare
relay, over stdio and over HTTP, all in front of the fast stdio backend, in one run.

Each path: the p50 it adds over a direct stdio call (concurrency 1), calls/s with 32 in flight, and the
front's own CPU time per call in that window (the front process only: relay or troupe, never the backend
or the client). The goals are ratios of paths measured side by side here.
"""
from __future__ import annotations

import contextlib
import statistics

from _bench_latency import _interleaved
from _bench_load import http_inflight, http_post_bytes, stdio_inflight
from _bench_modern import META, MODERN, ModernHttpRpc
from _bench_paths import bench_backend, fastmcp_http, stdio_entry, troupe_config, troupe_http, troupe_stdio
from _bench_report import Report, ms, ratio
from _bench_rpc import PYTHON, ROOT, BenchError, HttpRpc, Proc, StdioRpc

INFLIGHT = 32
# The goals of issue 20, each a ratio of two paths of the same run.
STDIO_ADDED_VS_RELAY = 1.2  # troupe stdio's added p50 at most this × the JSON relay's
STDIO_RATE_VS_DIRECT = 0.6  # troupe stdio calls/s at least this × direct stdio
HTTP_CPU_VS_STDIO = 2.0  # troupe HTTP CPU per call at most this × troupe stdio's
HTTP_RATE_VS_DIRECT = 0.5  # troupe HTTP calls/s at least this × a direct HTTP server
HTTP_RATE_VS_FASTMCP = 25.0  # and at least this × the FastMCP proxy
MODERN_VS_LEGACY = 1.0  # a modern call's CPU at most this × a legacy session call's

DIRECT, RELAY_BYTES, RELAY_JSON, T_STDIO = "direct stdio", "bare relay, bytes", "bare relay, JSON", "troupe stdio"
DIRECT_HTTP, T_HTTP, T_MODERN, F_HTTP = ("direct HTTP server", "troupe HTTP (legacy session)",
                                         "troupe HTTP (modern)", "FastMCP proxy HTTP")


def _relay(backend, parse: bool) -> StdioRpc:
    cmd = [PYTHON, str(ROOT / "scripts" / "_bench_relay.py"), *(["--json"] if parse else []), "--", *backend.cmd]
    return StdioRpc(cmd, label=f"relay-{'json' if parse else 'bytes'}")


def _direct_http() -> tuple[Proc, str]:
    proc = Proc([PYTHON, "-m", "tests.servers.bench_http"], label="bench-http", pipes=False)
    try:
        url = proc.wait_for_stderr(r"bench-http: serving (http://\S+/mcp)", 30).group(1)
    except Exception:
        proc.stop()
        raise
    return proc, url


def _legacy_posts(url: str, tool: str, arguments: dict, n: int) -> list[bytes]:
    """n sessions, each initialized; the tools/call POST of each, with its session's headers."""
    posts = []
    for _ in range(n):
        client = HttpRpc(url)
        try:
            client.initialize()
            headers = {k: v for k, v in client.headers.items() if k.lower().startswith("mcp-")}
        finally:
            client.close()
        posts.append(http_post_bytes(url, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                           "params": {"name": tool, "arguments": arguments}}, headers))
    return posts


def _modern_posts(url: str, tool: str, arguments: dict, n: int) -> list[bytes]:
    post = http_post_bytes(url, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                 "params": {"name": tool, "arguments": arguments, "_meta": META}},
                           {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool})
    return [post] * n


def run(settings, report: Report) -> dict:
    print(f"\n== 7. hot path: troupe against a bare relay, stdio and HTTP, {INFLIGHT} in flight", flush=True)
    section = "7 hot path [bench_backend]"
    backend = bench_backend()
    tool, arguments = backend.tool, backend.arguments
    config = troupe_config("hotpath", [stdio_entry("b", backend, prefix="")])
    with contextlib.ExitStack() as stack:
        stdio = {DIRECT: StdioRpc(list(backend.cmd), label="direct-hot"), RELAY_BYTES: _relay(backend, False),
                 RELAY_JSON: _relay(backend, True), T_STDIO: troupe_stdio("hotpath", config)}
        for client in stdio.values():
            stack.enter_context(client)
            client.initialize()
        stdio[T_STDIO].list_tools()  # troupe's first list waits for its backend
        d_proc, d_url = _direct_http()
        stack.callback(d_proc.stop)
        t_proc, t_url = troupe_http("hotpath", config)
        stack.callback(t_proc.stop)
        f_proc, f_url = fastmcp_http("hotpath", {"b": backend})
        stack.callback(f_proc.stop)
        http = {DIRECT_HTTP: HttpRpc(d_url), T_HTTP: HttpRpc(t_url), T_MODERN: ModernHttpRpc(t_url),
                F_HTTP: HttpRpc(f_url)}
        for name, client in http.items():
            stack.callback(client.close)
            client.initialize()
            if tool not in {t["name"] for t in client.list_tools()}:
                raise BenchError(f"{name}: no {tool!r} tool")
        clients = {**stdio, **http}
        paths = {name: (lambda c=c: c.call(tool, arguments)) for name, c in clients.items()}
        latency = _interleaved(paths, settings.latency_rounds, settings.latency_block, settings.latency_warmup)
        pids = {RELAY_BYTES: stdio[RELAY_BYTES].pid, RELAY_JSON: stdio[RELAY_JSON].pid, T_STDIO: stdio[T_STDIO].pid,
                DIRECT_HTTP: d_proc.pid, T_HTTP: t_proc.pid, T_MODERN: t_proc.pid, F_HTTP: f_proc.pid}
        posts = {DIRECT_HTTP: _legacy_posts(d_url, tool, arguments, INFLIGHT),
                 T_HTTP: _legacy_posts(t_url, tool, arguments, INFLIGHT),
                 T_MODERN: _modern_posts(t_url, tool, arguments, INFLIGHT),
                 F_HTTP: _legacy_posts(f_url, tool, arguments, INFLIGHT)}
        runs: dict[str, list[dict]] = {name: [] for name in clients}
        for _ in range(settings.throughput_rounds):  # alternating, so drift hits every path alike
            for name, client in stdio.items():
                runs[name].append(stdio_inflight(client, tool, arguments, INFLIGHT, settings.throughput_seconds,
                                                 settings.throughput_warmup, pids.get(name)))
            for name, reqs in posts.items():
                runs[name].append(http_inflight(t_url if name in (T_HTTP, T_MODERN) else
                                                d_url if name == DIRECT_HTTP else f_url, reqs,
                                                settings.throughput_seconds, settings.throughput_warmup,
                                                pids.get(name)))
    load = {name: _median(rs) for name, rs in runs.items()}
    return _report(report, section, latency, load)


def _median(rounds: list[dict]) -> dict:
    out = {"calls_per_s": statistics.median(r["calls_per_s"] for r in rounds), "rounds": rounds}
    cpus = [r["cpu_us_per_call"] for r in rounds if "cpu_us_per_call" in r]
    if cpus:
        out["cpu_us_per_call"] = statistics.median(cpus)
    return out


def _report(report: Report, section: str, latency: dict, load: dict) -> dict:
    direct_p50 = latency[DIRECT]["p50_ms"]
    added = {name: (f["p50_ms"] - direct_p50) * 1000.0 for name, f in latency.items()}  # µs
    rate = {name: f["calls_per_s"] for name, f in load.items()}
    cpu = {name: f.get("cpu_us_per_call") for name, f in load.items()}
    for name in latency:
        figure = f"+{added[name]:.0f} µs p50" if name != DIRECT else f"p50 {ms(direct_p50)}"
        figure += f"; {rate[name]:,.0f} calls/s"
        if cpu[name] is not None:
            figure += f"; CPU {cpu[name]:.0f} µs/call"
        base = DIRECT_HTTP if "HTTP" in name and name != DIRECT_HTTP else DIRECT
        report.row(section, name, figure, "baseline" if name in (DIRECT, DIRECT_HTTP)
                   else f"{ratio(rate[name], rate[base]):.2f}× {base} calls/s")
    goals = {
        "stdio added p50 vs JSON relay": (ratio(added[T_STDIO], added[RELAY_JSON]), "<=", STDIO_ADDED_VS_RELAY),
        "stdio calls/s vs direct": (ratio(rate[T_STDIO], rate[DIRECT]), ">=", STDIO_RATE_VS_DIRECT),
        "HTTP CPU/call vs stdio front": (ratio(cpu[T_HTTP] or 0.0, cpu[T_STDIO] or 0.0), "<=", HTTP_CPU_VS_STDIO),
        "HTTP calls/s vs direct HTTP": (ratio(rate[T_HTTP], rate[DIRECT_HTTP]), ">=", HTTP_RATE_VS_DIRECT),
        "HTTP calls/s vs FastMCP proxy": (ratio(rate[T_HTTP], rate[F_HTTP]), ">=", HTTP_RATE_VS_FASTMCP),
        "modern CPU/call vs legacy": (ratio(cpu[T_MODERN] or 0.0, cpu[T_HTTP] or 0.0), "<=", MODERN_VS_LEGACY),
    }
    met = {}
    for goal, (value, op, target) in goals.items():
        met[goal] = value <= target if op == "<=" else value >= target
        report.row(section, f"goal: {goal}", f"{value:.2f}×", "PASS" if met[goal] else "MISS",
                   f"{op} {target:g}×", met[goal])
    report.row(section, "  modern vs legacy, calls/s and added p50",
               f"{ratio(rate[T_MODERN], rate[T_HTTP]):.2f}× calls/s",
               f"{ratio(added[T_MODERN], added[T_HTTP]):.2f}× added p50")
    return {"inflight": INFLIGHT, "latency": latency, "added_p50_us": added, "load": load,
            "goals": {g: {"ratio": v, "op": op, "target": t, "met": met[g]} for g, (v, op, t) in goals.items()}}
