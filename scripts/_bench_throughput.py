"""Section 2 of scripts/bench.py: throughput of concurrent callers over Streamable HTTP, both protocol eras."""
from __future__ import annotations

import contextlib
import statistics
import threading
import time
from typing import Callable

from _bench_modern import MODERN_VS_LEGACY_TARGET, ModernHttpRpc, cpu_seconds
from _bench_paths import (bench_backend, everything_http, fastmcp_http, have_everything, http_entry, stdio_entry,
                          troupe_config, troupe_http)
from _bench_report import Report, ms, ratio
from _bench_rpc import BenchError, HttpRpc

THROUGHPUT_VS_DIRECT, THROUGHPUT_VS_FASTMCP = 0.7, 10.0
CLIENT_TIMEOUT_S = 30.0

# A path: how to make one caller's client, and the aggregator process whose CPU it costs (None: not measured).
PathSpec = tuple[Callable[[], HttpRpc], int | None]


def _legacy(url: str) -> Callable[[], HttpRpc]:
    return lambda: HttpRpc(url, timeout=CLIENT_TIMEOUT_S)


def _modern(url: str) -> Callable[[], HttpRpc]:
    return lambda: ModernHttpRpc(url, timeout=CLIENT_TIMEOUT_S)


def _hammer(path: PathSpec, tool: str, arguments: dict, callers: int, seconds: float, warmup: float) -> dict:
    """`callers` threads, each its own client (a session for a legacy one) and keep-alive connection, calling
    back to back; calls/s after warmup, and the aggregator's CPU time per call over the same window."""
    make, pid = path
    clients = [make() for _ in range(callers)]
    try:
        for client in clients:
            client.initialize()
        ends: list[list[float]] = [[] for _ in clients]
        errors: list[str] = []
        go = threading.Event()
        clock = time.perf_counter
        t_start = clock() + 0.05  # every thread is waiting on `go` by then
        t_count, t_end = t_start + warmup, t_start + warmup + seconds

        def caller(i: int) -> None:
            client, mine = clients[i], ends[i]
            go.wait()
            while clock() < t_end:
                try:
                    client.call(tool, arguments)
                except Exception as exc:  # counted, and shown: a failing path must not look fast
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    if len(errors) > 1000:
                        return  # a broken path: stop spinning on it
                    continue
                mine.append(clock())

        threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(callers)]
        for t in threads:
            t.start()
        time.sleep(max(0.0, t_start - clock()))
        go.set()
        cpu = None
        if pid is not None:  # the window's bounds, read from here while the callers run
            time.sleep(max(0.0, t_count - clock()))
            cpu_from = cpu_seconds(pid)
            time.sleep(max(0.0, t_end - clock()))
            cpu = cpu_seconds(pid) - cpu_from
        for t in threads:
            t.join(timeout=seconds + warmup + 60)
        done = sum(1 for mine in ends for e in mine if t_count <= e < t_end)
        if done == 0:
            # A path slower than the window (a call takes longer than warmup + seconds) still
            # has a rate: every call it finished, over the time from the start to the last one.
            finished = [e for mine in ends for e in mine]
            if not finished:
                raise BenchError(f"no call completed; errors: {errors[:3]}")
            span = max(finished) - t_start
            return {"calls_per_s": len(finished) / span, "calls": len(finished), "seconds": span,
                    "callers": callers, "errors": len(errors), "first_errors": errors[:3],
                    "note": "no call ended inside the window: rate over the whole run"}
        out = {"calls_per_s": done / seconds, "calls": done, "seconds": seconds, "callers": callers,
               "errors": len(errors), "first_errors": errors[:3]}
        if cpu is not None:
            out["cpu_ms_per_call"] = cpu * 1000.0 / done
        return out
    finally:
        for client in clients:
            client.close()


def _probe(name: str, path: PathSpec, tool: str) -> None:
    """One client lists the tools first: troupe's first list also waits for its upstream."""
    client = path[0]()
    try:
        client.initialize()
        if tool not in {t["name"] for t in client.list_tools()}:
            raise BenchError(f"{name}: no {tool!r} tool")
    finally:
        client.close()


def _rounds(paths: dict[str, PathSpec], tool: str, arguments: dict, settings) -> dict:
    """Every path `throughput_rounds` times, alternating so drift hits all alike; medians per path."""
    for name, path in paths.items():
        _probe(name, path, tool)
    runs: dict[str, list[dict]] = {name: [] for name in paths}
    for _ in range(settings.throughput_rounds):
        for name, path in paths.items():
            runs[name].append(_hammer(path, tool, arguments, settings.callers, settings.throughput_seconds,
                                      settings.throughput_warmup))
    figures = {}
    for name, rs in runs.items():
        figures[name] = {"calls_per_s": statistics.median(r["calls_per_s"] for r in rs), "rounds": rs,
                         "errors": sum(r["errors"] for r in rs)}
        cpus = [r["cpu_ms_per_call"] for r in rs if "cpu_ms_per_call" in r]
        if cpus:
            figures[name]["cpu_ms_per_call"] = statistics.median(cpus)
    return figures


def _rate(fig: dict) -> str:
    return f"{fig['calls_per_s']:.0f} calls/s" + (f" ({fig['errors']} errors)" if fig["errors"] else "")


def _era(report: Report, section: str, legacy: dict, modern: dict) -> dict:
    """Modern over legacy at the same concurrency: calls/s (target >= 1.0, its row printed by the caller)
    and troupe's CPU per call (target <= 1.0, rows printed here)."""
    rate = ratio(modern["calls_per_s"], legacy["calls_per_s"])
    cpu = ratio(modern["cpu_ms_per_call"], legacy["cpu_ms_per_call"])
    report.row(section, "  troupe CPU per call, legacy", ms(legacy["cpu_ms_per_call"]), "baseline")
    report.row(section, "  troupe CPU per call, modern", ms(modern["cpu_ms_per_call"]), f"{cpu:.2f}× legacy",
               f"<= {MODERN_VS_LEGACY_TARGET}× legacy", cpu <= MODERN_VS_LEGACY_TARGET)
    return {"ratios": {"calls_per_s": rate, "cpu_per_call": cpu}, "target": MODERN_VS_LEGACY_TARGET,
            "met": {"calls_per_s": rate >= MODERN_VS_LEGACY_TARGET, "cpu_per_call": cpu <= MODERN_VS_LEGACY_TARGET}}


def _modern_row(report: Report, section: str, name: str, fig: dict, legacy: dict, other: str) -> None:
    rate = ratio(fig["calls_per_s"], legacy["calls_per_s"])
    report.row(section, name, _rate(fig), f"{rate:.2f}× legacy; {other}", f">= {MODERN_VS_LEGACY_TARGET}× legacy",
               rate >= MODERN_VS_LEGACY_TARGET)


def throughput(settings, report: Report) -> dict:
    print(f"\n== 2. throughput, {settings.callers} concurrent callers over Streamable HTTP", flush=True)
    section = f"2 throughput c={settings.callers} [server-everything HTTP]"
    if not have_everything():
        raise BenchError("server-everything is not installed (.ci/run installs it)")
    tool, arguments = "echo", {"message": "hello"}
    legacy, modern = "troupe HTTP→HTTP", "troupe HTTP→HTTP (modern)"
    with contextlib.ExitStack() as stack:
        backend, url = everything_http()
        stack.callback(backend.stop)
        t_proc, t_url = troupe_http("throughput", troupe_config("throughput", [http_entry("e", url, prefix="")]))
        stack.callback(t_proc.stop)
        f_proc, f_url = fastmcp_http("throughput", {"e": url})
        stack.callback(f_proc.stop)
        # The modern callers reach the same upstream through the same troupe: only the front's era differs.
        paths: dict[str, PathSpec] = {"direct": (_legacy(url), None), legacy: (_legacy(t_url), t_proc.pid),
                                  modern: (_modern(t_url), t_proc.pid),
                                  "FastMCP proxy HTTP→HTTP": (_legacy(f_url), f_proc.pid)}
        figures = _rounds(paths, tool, arguments, settings)
    d, t, f = (figures[k]["calls_per_s"] for k in ("direct", legacy, "FastMCP proxy HTTP→HTTP"))
    vs_direct, vs_fastmcp = ratio(t, d), ratio(t, f)
    for name, fig in figures.items():
        if name == legacy:
            report.row(section, name, _rate(fig), f"{vs_direct:.2f}× direct",
                       f">= {THROUGHPUT_VS_DIRECT}× direct", vs_direct >= THROUGHPUT_VS_DIRECT)
            report.row(section, "", "", f"{vs_fastmcp:.1f}× FastMCP proxy",
                       f">= {THROUGHPUT_VS_FASTMCP:.0f}× FastMCP", vs_fastmcp >= THROUGHPUT_VS_FASTMCP)
        elif name == modern:
            _modern_row(report, section, name, fig, figures[legacy], f"{ratio(fig['calls_per_s'], d):.2f}× direct")
        else:
            report.row(section, name, _rate(fig),
                       "baseline" if name == "direct" else f"{ratio(fig['calls_per_s'], d):.2f}× direct")
    era = _era(report, section, figures[legacy], figures[modern])
    ceiling = _ceiling(settings, report)
    return {"backend": "server-everything streamableHttp", "tool": tool, "paths": figures,
            "stdio_backend": ceiling, "modern_vs_legacy": era,
            "ratios": {"troupe/direct": vs_direct, "troupe/fastmcp": vs_fastmcp,
                       "troupe_modern/troupe_legacy": era["ratios"]["calls_per_s"]},
            "targets": {"troupe/direct": THROUGHPUT_VS_DIRECT, "troupe/fastmcp": THROUGHPUT_VS_FASTMCP,
                        "troupe_modern/troupe_legacy": MODERN_VS_LEGACY_TARGET},
            "met": {"troupe/direct": vs_direct >= THROUGHPUT_VS_DIRECT,
                    "troupe/fastmcp": vs_fastmcp >= THROUGHPUT_VS_FASTMCP,
                    "troupe_modern/troupe_legacy": era["met"]["calls_per_s"]}}


def _ceiling(settings, report: Report) -> dict:
    """The same callers in front of the fast stdio backend, never the bottleneck: the aggregators' own
    ceilings, and the modern front's against the legacy one's where nothing else limits them."""
    section = f"2 throughput c={settings.callers} [HTTP in, bench_backend stdio out]"
    legacy, modern, peer = "troupe HTTP→stdio", "troupe HTTP→stdio (modern)", "FastMCP proxy HTTP→stdio"
    backend = bench_backend()
    with contextlib.ExitStack() as stack:
        t_proc, t_url = troupe_http("ceiling", troupe_config("ceiling", [stdio_entry("b", backend, prefix="")]))
        stack.callback(t_proc.stop)
        f_proc, f_url = fastmcp_http("ceiling", {"b": backend})
        stack.callback(f_proc.stop)
        paths: dict[str, PathSpec] = {legacy: (_legacy(t_url), t_proc.pid), modern: (_modern(t_url), t_proc.pid),
                                  peer: (_legacy(f_url), f_proc.pid)}
        figures = _rounds(paths, backend.tool, backend.arguments, settings)
    t, f = figures[legacy]["calls_per_s"], figures[peer]["calls_per_s"]
    for name, fig in figures.items():
        if name == modern:
            _modern_row(report, section, name, fig, figures[legacy],
                        f"{ratio(fig['calls_per_s'], f):.1f}× FastMCP proxy")
        else:
            report.row(section, name, _rate(fig), f"{ratio(t, f):.1f}× FastMCP proxy" if name == legacy else "baseline")
    era = _era(report, section, figures[legacy], figures[modern])
    return {"backend": "bench_backend (stdio)", "paths": figures, "modern_vs_legacy": era,
            "ratios": {"troupe/fastmcp": ratio(t, f), "troupe_modern/troupe_legacy": era["ratios"]["calls_per_s"]}}
