"""Section 1 of scripts/bench.py: tools/call latency at concurrency 1, direct vs troupe vs the FastMCP proxy."""
from __future__ import annotations

import contextlib
import time

from _bench_paths import (Backend, bench_backend, everything_stdio, fastmcp_http, fastmcp_stdio, have_everything,
                          http_client, stdio_entry, troupe_config, troupe_http, troupe_stdio)
from _bench_report import Report, ms, ratio
from _bench_rpc import BenchError, StdioRpc, percentiles

ADDED_P50_TARGET_MS = 0.5


def _interleaved(paths: dict, rounds: int, block: int, warmup: int) -> dict:
    """Blocks of back-to-back calls, rotating over the paths each round, so every path sees the same machine."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for fn in paths.values():
        for _ in range(warmup):
            fn()
    clock = time.perf_counter
    for _ in range(rounds):
        for name, fn in paths.items():
            bucket = samples[name]
            for _ in range(block):
                t0 = clock()
                fn()
                bucket.append(clock() - t0)
    return {name: percentiles(s) for name, s in samples.items()}


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
        clients["troupe HTTP→stdio"] = t_http
        clients["FastMCP proxy HTTP→stdio"] = f_http
        for name, client in clients.items():
            names = {t["name"] for t in client.list_tools()}  # troupe's first list waits for its backend
            if tool not in names:
                raise BenchError(f"{name}: tool {tool!r} not listed (got {sorted(names)[:10]})")
        paths = {name: (lambda c=c: c.call(tool, arguments)) for name, c in clients.items()}
        paths["ping direct (floor)"] = lambda: direct.request("ping")
        paths["ping through troupe stdio"] = lambda: t_stdio.request("ping")
        figures = _interleaved(paths, settings.latency_rounds, settings.latency_block, settings.latency_warmup)
    d, ts, th = figures["direct (stdio)"], figures["troupe stdio→stdio"], figures["troupe HTTP→stdio"]
    fs, fh = figures["FastMCP proxy stdio→stdio"], figures["FastMCP proxy HTTP→stdio"]
    added = ts["p50_ms"] - d["p50_ms"]
    for name, f in figures.items():
        ratios, target, met = [], "", None
        if name.startswith("troupe stdio"):
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct (+{ms(added)})",
                      f"{ratio(f['p50_ms'], fs['p50_ms']):.2f}× FastMCP"]
            target, met = f"p50 +<{ADDED_P50_TARGET_MS} ms over direct", added < ADDED_P50_TARGET_MS
        elif name.startswith("troupe HTTP"):
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct stdio",
                      f"{ratio(f['p50_ms'], fh['p50_ms']):.2f}× FastMCP HTTP"]
        elif name.startswith("FastMCP"):
            ratios = [f"{ratio(f['p50_ms'], d['p50_ms']):.2f}× direct"]
        report.row(section, name, f"p50 {ms(f['p50_ms'])}  p99 {ms(f['p99_ms'])}", "; ".join(ratios), target, met)
    return {"backend": backend.label, "paths": figures, "troupe_added_p50_ms": added,
            "ratios": {"troupe_stdio/direct_p50": ratio(ts["p50_ms"], d["p50_ms"]),
                       "troupe_stdio/fastmcp_stdio_p50": ratio(ts["p50_ms"], fs["p50_ms"]),
                       "troupe_http/direct_p50": ratio(th["p50_ms"], d["p50_ms"]),
                       "troupe_http/fastmcp_http_p50": ratio(th["p50_ms"], fh["p50_ms"])},
            "target_added_p50_ms": ADDED_P50_TARGET_MS, "met": added < ADDED_P50_TARGET_MS}


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
