"""Section 1 of scripts/bench.py: tools/call latency at concurrency 1, direct vs troupe vs the FastMCP proxy."""
from __future__ import annotations

import contextlib
import time

from _bench_modern import MODERN_VS_LEGACY_TARGET, ModernHttpRpc, cpu_seconds
from _bench_paths import (Backend, bench_backend, everything_stdio, fastmcp_http, fastmcp_stdio, have_everything,
                          http_client, stdio_entry, troupe_config, troupe_http, troupe_stdio)
from _bench_report import Report, ms, ratio
from _bench_rpc import BenchError, StdioRpc, percentiles

ADDED_P50_TARGET_MS = 0.5
LEGACY_HTTP, MODERN_HTTP = "troupe HTTP→stdio", "troupe HTTP→stdio (modern)"


def _interleaved(paths: dict, rounds: int, block: int, warmup: int, cpu_pids: dict | None = None) -> dict:
    """Blocks of back-to-back calls, rotating over the paths each round, so every path sees the same machine.
    For a path in cpu_pids, that process's CPU time over its blocks, per call (read outside the timed calls)."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    cpu = {name: 0.0 for name in cpu_pids or {}}
    for fn in paths.values():
        for _ in range(warmup):
            fn()
    clock = time.perf_counter
    for _ in range(rounds):
        for name, fn in paths.items():
            bucket = samples[name]
            pid = (cpu_pids or {}).get(name)
            before = cpu_seconds(pid) if pid else 0.0
            for _ in range(block):
                t0 = clock()
                fn()
                bucket.append(clock() - t0)
            if pid:
                cpu[name] += cpu_seconds(pid) - before
    figures = {name: percentiles(s) for name, s in samples.items()}
    for name, seconds in cpu.items():
        figures[name]["cpu_ms_per_call"] = seconds * 1000.0 / len(samples[name])
    return figures


def _measure_backend(backend: Backend, settings, report: Report, section: str) -> dict:
    """All paths alive at once in front of their own copy of the same backend; interleaved timing."""
    tool, arguments = backend.tool, backend.arguments
    config = troupe_config(f"latency-{backend.label}", [stdio_entry("b", backend, prefix="")])
    with contextlib.ExitStack() as stack:
        direct = stack.enter_context(StdioRpc(list(backend.cmd), label=f"direct-{backend.label}"))
        t_stdio = stack.enter_context(troupe_stdio(backend.label, config))
        t_http_proc, t_url = troupe_http(backend.label, config)
        stack.callback(t_http_proc.stop)
        f_stdio = stack.enter_context(fastmcp_stdio(backend.label, {"b": backend}))
        f_http_proc, f_url = fastmcp_http(backend.label, {"b": backend})
        stack.callback(f_http_proc.stop)
        clients = {"direct (stdio)": direct, "troupe stdio→stdio": t_stdio, "FastMCP proxy stdio→stdio": f_stdio}
        for client in clients.values():
            client.initialize()
        t_http, f_http = http_client(t_url), http_client(f_url)
        stack.callback(t_http.close)
        stack.callback(f_http.close)
        t_modern = ModernHttpRpc(t_url)  # the same troupe, the same front: only the era differs
        stack.callback(t_modern.close)
        t_modern.initialize()
        clients[LEGACY_HTTP] = t_http
        clients[MODERN_HTTP] = t_modern
        clients["FastMCP proxy HTTP→stdio"] = f_http
        for name, client in clients.items():
            names = {t["name"] for t in client.list_tools()}  # troupe's first list waits for its backend
            if tool not in names:
                raise BenchError(f"{name}: tool {tool!r} not listed (got {sorted(names)[:10]})")
        paths = {name: (lambda c=c: c.call(tool, arguments)) for name, c in clients.items()}
        paths["ping direct (floor)"] = lambda: direct.request("ping")
        paths["ping through troupe stdio"] = lambda: t_stdio.request("ping")
        # Each aggregator's own process: what troupe's front spends per call, beside what the client waits.
        cpu_pids = {"troupe stdio→stdio": t_stdio.pid, LEGACY_HTTP: t_http_proc.pid, MODERN_HTTP: t_http_proc.pid,
                    "FastMCP proxy stdio→stdio": f_stdio.pid, "FastMCP proxy HTTP→stdio": f_http_proc.pid}
        figures = _interleaved(paths, settings.latency_rounds, settings.latency_block, settings.latency_warmup,
                               cpu_pids)
    d, ts, th = figures["direct (stdio)"], figures["troupe stdio→stdio"], figures[LEGACY_HTTP]
    fs, fh = figures["FastMCP proxy stdio→stdio"], figures["FastMCP proxy HTTP→stdio"]
    added = ts["p50_ms"] - d["p50_ms"]
    tm = figures[MODERN_HTTP]
    era = _modern_vs_legacy(th, tm, d)
    for name, f in figures.items():
        ratios, target, met = [], "", None
        if name.startswith("troupe stdio"):
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct (+{ms(added)})",
                      f"{ratio(f['p50_ms'], fs['p50_ms']):.2f}× FastMCP"]
            target, met = f"p50 +<{ADDED_P50_TARGET_MS} ms over direct", added < ADDED_P50_TARGET_MS
        elif name == MODERN_HTTP:
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct stdio (+{ms(era['added_p50_ms']['modern'])})",
                      f"added {era['ratios']['added_p50']:.2f}× legacy HTTP's"]
            target, met = f"added p50 <= {MODERN_VS_LEGACY_TARGET}× legacy", era["met"]["added_p50"]
        elif name.startswith("troupe HTTP"):
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct stdio (+{ms(era['added_p50_ms']['legacy'])})",
                      f"{ratio(f['p50_ms'], fh['p50_ms']):.2f}× FastMCP HTTP"]
        elif name.startswith("FastMCP"):
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct"]
        report.row(section, name, f"p50 {ms(f['p50_ms'])}  p99 {ms(f['p99_ms'])}", "; ".join(ratios), target, met)
    report.row(section, "  troupe CPU per call, legacy HTTP", f"{ms(th['cpu_ms_per_call'])}", "baseline")
    report.row(section, "  troupe CPU per call, modern HTTP", f"{ms(tm['cpu_ms_per_call'])}",
               f"{era['ratios']['cpu_per_call']:.2f}× legacy HTTP", f"<= {MODERN_VS_LEGACY_TARGET}× legacy",
               era["met"]["cpu_per_call"])
    return {"backend": backend.label, "paths": figures, "troupe_added_p50_ms": added,
            "ratios": {"troupe_stdio/direct_p50": ratio(ts["p50_ms"], d["p50_ms"]),
                       "troupe_stdio/fastmcp_stdio_p50": ratio(ts["p50_ms"], fs["p50_ms"]),
                       "troupe_http/direct_p50": ratio(th["p50_ms"], d["p50_ms"]),
                       "troupe_http/fastmcp_http_p50": ratio(th["p50_ms"], fh["p50_ms"]),
                       "troupe_http_modern/direct_p50": ratio(tm["p50_ms"], d["p50_ms"])},
            "target_added_p50_ms": ADDED_P50_TARGET_MS, "met": added < ADDED_P50_TARGET_MS,
            "modern_vs_legacy_http": era}


def _modern_vs_legacy(legacy: dict, modern: dict, direct: dict) -> dict:
    """Modern over legacy HTTP: p50 added over the direct call (what troupe's front adds, the client's
    own HTTP cost included alike) and troupe's CPU per call; targets <= 1.0."""
    added = {"legacy": legacy["p50_ms"] - direct["p50_ms"], "modern": modern["p50_ms"] - direct["p50_ms"]}
    ratios = {"added_p50": ratio(added["modern"], added["legacy"]),
              "p50": ratio(modern["p50_ms"], legacy["p50_ms"]),
              "cpu_per_call": ratio(modern["cpu_ms_per_call"], legacy["cpu_ms_per_call"])}
    return {"added_p50_ms": added, "cpu_ms_per_call": {"legacy": legacy["cpu_ms_per_call"],
                                                       "modern": modern["cpu_ms_per_call"]},
            "ratios": ratios, "target": MODERN_VS_LEGACY_TARGET,
            "met": {"added_p50": ratios["added_p50"] <= MODERN_VS_LEGACY_TARGET,
                    "cpu_per_call": ratios["cpu_per_call"] <= MODERN_VS_LEGACY_TARGET}}


def run(settings, report: Report) -> dict:
    print("\n== 1. tools/call latency, concurrency 1", flush=True)
    backends = [bench_backend()]
    if have_everything():
        backends.append(everything_stdio())
    else:
        report.note("server-everything not installed (.ci/run installs it): latency measured on bench_backend only")
    out = {}
    for backend in backends:
        out[backend.label] = _measure_backend(backend, settings, report, f"1 latency c=1 [{backend.label}]")
    return {"backends": out}
