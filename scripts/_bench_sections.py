"""Sections 3-5 of scripts/bench.py: cold start, meta-tool latency, memory (2 is in _bench_throughput).

Sections 3 and 5 carry issue 31's goals ("Lean start") as PASS/MISS rows and under "goals" in the JSON,
each against baselines measured in the same run: the spawn floor (the backends launched and listed with
no aggregator) and mcp-proxy (a peer stdio→HTTP bridge, in its own venv: see .ci/run).
"""
from __future__ import annotations

import statistics
import time

import orjson

from _bench_paths import (MCP_PROXY, bench_backend, compile_sources, fastmcp_stdio, have_mcp_proxy, mcp_proxy_http,
                          stdio_entry, troupe_config, troupe_stdio)
from _bench_report import Report, ms, ratio
from _bench_rpc import BenchError, HttpRpc, Proc, StdioRpc, rss_kib, time_calls

# ---------------------------------------------------------------- 3. cold start

COLD_TOOLS = 5  # echo + 4 synthetic tools per backend
COLD_RATIO_TARGET = 2.0


def _until_listed(client: StdioRpc, names: set, deadline: float) -> None:
    """tools/list until every expected name is there (troupe's first list already waits for start-up)."""
    while True:
        listed = {t["name"] for t in client.list_tools(timeout=max(1.0, deadline - time.monotonic()))}
        if names <= listed:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{client.label}: {len(names - listed)} of {len(names)} tools missing at the deadline")
        time.sleep(0.01)


def _cold(kind: str, n: int, budget: float) -> dict:
    """Launch → initialize → every tool listed → one call to each backend answered."""
    backend = bench_backend(COLD_TOOLS - 1)
    names = [f"b{i:02d}" for i in range(n)]
    synthetic = [f"t{i:05d}" for i in range(COLD_TOOLS - 1)]
    if kind == "troupe":
        client = troupe_stdio(f"cold-{n}", troupe_config(f"cold-{n}", [stdio_entry(s, backend) for s in names]))
        qualified = {s: f"{s}__echo" for s in names}
        expected = {f"{s}__{t}" for s in names for t in ["echo", *synthetic]}
    else:
        client = fastmcp_stdio(f"cold-{n}", {s: backend for s in names})
        one = n == 1  # FastMCP prefixes only when it mounts several servers
        qualified = {s: "echo" if one else f"{s}_echo" for s in names}
        expected = {(t if one else f"{s}_{t}") for s in names for t in ["echo", *synthetic]}
    deadline, progress = time.monotonic() + budget, {}
    try:
        client.initialize(timeout=budget)
        progress["initialize_s"] = time.perf_counter() - client.started
        _until_listed(client, expected, deadline)
        progress["listed_s"] = time.perf_counter() - client.started
        for s in names:
            client.call(qualified[s], {"text": s}, timeout=max(1.0, deadline - time.monotonic()))
        progress["callable_s"] = time.perf_counter() - client.started
    except BenchError as exc:
        if kind == "troupe":
            raise
        # The peer is allowed to be too slow: keep the stages it reached within the budget.
        progress["capped"] = f"not done within {budget:.0f} s: {exc}"[:300]
    finally:
        client.stop()
    return progress


QUIET_IDLE = 0.9  # a cold run starts once the CPUs were this idle over QUIET_WINDOW_S (or after quiet_wait)
QUIET_WINDOW_S = 0.1


def _cpu_idle_and_total() -> tuple[int, int]:
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return ticks[3] + ticks[4], sum(ticks[:8])  # idle + iowait, all (guest time is in user already)


def _quiet(max_wait: float) -> None:
    """Wait (at most `max_wait` s) until the last run's processes have exited and nothing else is busy."""
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        try:
            idle0, total0 = _cpu_idle_and_total()
            time.sleep(QUIET_WINDOW_S)
            idle1, total1 = _cpu_idle_and_total()
        except OSError:  # no /proc/stat (not Linux): nothing to wait for
            return
        if total1 > total0 and (idle1 - idle0) / (total1 - total0) >= QUIET_IDLE:
            return


def _spawn_floor(n: int, budget: float) -> float:
    """No aggregator: launch n backends at once from here and initialize + list each (what n processes cost)."""
    backend = bench_backend(COLD_TOOLS - 1)
    t0 = time.perf_counter()
    procs = [StdioRpc(list(backend.cmd), label=f"floor-{i}") for i in range(n)]
    try:
        for p in procs:
            p.initialize(timeout=budget)
            p.list_tools(timeout=budget)
        return time.perf_counter() - t0
    finally:
        for p in procs:
            p.stop(grace=0.2)


def _http_initialize(client: HttpRpc, proc: Proc, deadline: float) -> None:
    """initialize as soon as the port accepts (a 5 ms retry, tighter than wait_http's 20 ms poll)."""
    while True:
        try:
            client.initialize()
            return
        except ConnectionRefusedError:
            client.close()
        if proc.proc.poll() is not None:
            raise BenchError(f"{proc.label} exited ({proc.proc.returncode}):\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"{proc.label}: not listening after the budget")
        time.sleep(0.005)


def _http_until_listed(client: HttpRpc, label: str, names: set, deadline: float) -> None:
    while True:
        if names <= {t["name"] for t in client.list_tools()}:
            return
        if time.monotonic() > deadline:
            raise BenchError(f"{label}: tools missing at the deadline")
        time.sleep(0.01)


def _mcp_proxy_started(label: str, budget: float) -> tuple[Proc, HttpRpc, dict]:
    """mcp-proxy in front of one bench_backend: launched, initialized, every tool listed (and the times)."""
    backend = bench_backend(COLD_TOOLS - 1)
    proc, url = mcp_proxy_http(label, backend)
    client = HttpRpc(url, timeout=budget)
    deadline, progress = time.monotonic() + budget, {}
    try:
        _http_initialize(client, proc, deadline)
        progress["initialize_s"] = time.perf_counter() - proc.started
        _http_until_listed(client, proc.label, {"echo", *(f"t{i:05d}" for i in range(COLD_TOOLS - 1))}, deadline)
        progress["listed_s"] = time.perf_counter() - proc.started
        client.call("echo", {"text": label})
        progress["callable_s"] = time.perf_counter() - proc.started
    except BaseException:
        client.close()
        proc.stop()
        raise
    return proc, client, progress


def _mcp_proxy_cold(budget: float) -> dict:
    proc, client, progress = _mcp_proxy_started("cold", budget)
    client.close()
    proc.stop()
    return progress


def bytecode_first(report: Report) -> None:
    """Once per run, before anything is timed at start: troupe and its backends start from bytecode."""
    global _COMPILED
    if _COMPILED:
        return
    _COMPILED = True
    took, ok = compile_sources()
    if ok:
        report.note(f"sections 3 and 5: `python -m compileall -q actors tests/servers` ran first ({took:.1f} s), so "
                    "troupe and the backends start from bytecode as installed code does (PYTHONDONTWRITEBYTECODE "
                    "would have them compile every module on every start)")
    else:
        report.note("sections 3 and 5: compileall of actors and tests/servers FAILED: starts include compiling")


_COMPILED = False
NO_MCP_PROXY = "mcp-proxy: not installed (see .ci/run)"


def cold_start(settings, report: Report) -> dict:
    print("\n== 3. cold start: launch until every tool of N stdio backends is callable", flush=True)
    bytecode_first(report)
    section = "3 cold start [bench_backend]"
    out: dict = {"tools_per_backend": COLD_TOOLS, "troupe": {}, "fastmcp": {}, "spawn_floor": {},
                 "spawn_floor_runs": {}}
    for n in settings.cold_ns:
        # troupe and its floor alternate, each after the machine went quiet: a difference of the two
        # medians is troupe's share, and a drift of the machine's load between two blocks of runs
        # (or the last run's 50 processes still exiting) would land in it otherwise.
        runs, floors = [], []
        for _ in range(settings.cold_reps):
            _quiet(settings.quiet_wait)
            runs.append(_cold("troupe", n, settings.cold_budget))
            _quiet(settings.quiet_wait)
            floors.append(_spawn_floor(n, settings.cold_budget))
        out["troupe"][n] = {"callable_s": statistics.median(r["callable_s"] for r in runs),
                            "listed_s": statistics.median(r["listed_s"] for r in runs),
                            "initialize_s": statistics.median(r["initialize_s"] for r in runs), "runs": runs}
        out["spawn_floor"][n] = statistics.median(floors)
        out["spawn_floor_runs"][n] = floors
    for n in settings.cold_ns:
        if n > settings.fastmcp_cold_max:
            out["fastmcp"][n] = {"skipped": f"N over {settings.fastmcp_cold_max}"}
            continue
        out["fastmcp"][n] = _cold("fastmcp", n, settings.fastmcp_cold_budget)
        if "capped" in out["fastmcp"][n]:
            report.note(f"FastMCP proxy cold start N={n}: capped, not callable within "
                        f"{settings.fastmcp_cold_budget:.0f} s (it launches backends per request)")
    peer: dict[str, float] | None = None
    if have_mcp_proxy():
        runs = [_mcp_proxy_cold(settings.cold_budget) for _ in range(settings.cold_reps)]
        peer = {key: statistics.median(r[key] for r in runs) for key in ("initialize_s", "listed_s", "callable_s")}
        out["mcp_proxy"] = {1: {**peer, "runs": runs}}
    else:
        out["mcp_proxy"] = {"missing": NO_MCP_PROXY}
    base = out["troupe"][settings.cold_ns[0]]["callable_s"]
    for n in settings.cold_ns:
        t = out["troupe"][n]
        r = ratio(t["callable_s"], base)
        target = met = None
        if n == settings.cold_ns[-1] and n > 1:
            target, met = f"< {COLD_RATIO_TARGET:.0f}× N={settings.cold_ns[0]}", r < COLD_RATIO_TARGET
            out["ratio_max_over_min"], out["met"] = r, met
        f = out["fastmcp"][n]
        vs = f"; {ratio(t['callable_s'], f['callable_s']):.2f}× FastMCP" if "callable_s" in f else ""
        report.row(section, f"troupe N={n}", f"{t['callable_s'] * 1000:.0f} ms (init {t['initialize_s'] * 1000:.0f}, "
                   f"listed {t['listed_s'] * 1000:.0f})", f"{r:.2f}× N={settings.cold_ns[0]}{vs}", target or "", met)
    for n in settings.cold_ns:
        # What troupe adds on top of launching the same backends with no aggregator at all.
        own = out["troupe"][n]["callable_s"] - out["spawn_floor"][n]
        out["troupe"][n]["over_spawn_floor_s"] = own
        report.row(section, f"troupe N={n} minus spawn floor", f"{own * 1000:.0f} ms",
                   f"{ratio(own, base - out['spawn_floor'][settings.cold_ns[0]]):.2f}× N={settings.cold_ns[0]}")
    for n in settings.cold_ns:
        f = out["fastmcp"][n]
        if "callable_s" in f:
            figure = f"{f['callable_s'] * 1000:.0f} ms"
        elif "listed_s" in f:
            figure = f"listed {f['listed_s'] * 1000:.0f} ms, calls capped"
        else:
            figure = f.get("skipped") or "capped"
        report.row(section, f"FastMCP proxy N={n}", figure)
    if peer is None:
        report.row(section, NO_MCP_PROXY, f"no {MCP_PROXY}")
    else:
        # mcp-proxy serves HTTP only: its figure includes opening its port (it does so once its backend answered).
        report.row(section, "mcp-proxy N=1 (HTTP), first tools/list",
                   f"{peer['listed_s'] * 1000:.0f} ms (init {peer['initialize_s'] * 1000:.0f}, "
                   f"callable {peer['callable_s'] * 1000:.0f})",
                   f"troupe {ratio(out['troupe'][settings.cold_ns[0]]['listed_s'], peer['listed_s']):.2f}×")
    for n in settings.cold_ns:
        report.row(section, f"spawn floor N={n} (no aggregator)", f"{out['spawn_floor'][n] * 1000:.0f} ms")
    out["goals"] = _cold_goals(out, settings.cold_ns, report, section)
    return out


COLD_FIRST_LIST_FACTOR = 1.3  # issue 31: first tools/list with 1 backend <= 1.3× its spawn floor + 0.25 s
COLD_FIRST_LIST_SLACK_S = 0.25
COLD_SHARE_TARGET = 1.3  # troupe's own share of an N-backend start <= 1.3× its share for one


def _cold_goals(out: dict, ns: tuple, report: Report, section: str) -> dict:
    """Issue 31's start-up goals, on `listed_s` (launch → initialize → tools/list has every tool)."""
    lo, hi = ns[0], ns[-1]
    listed = {n: out["troupe"][n]["listed_s"] for n in (lo, hi)}
    floor = {n: out["spawn_floor"][n] for n in (lo, hi)}
    limit = COLD_FIRST_LIST_FACTOR * floor[lo] + COLD_FIRST_LIST_SLACK_S
    first = {"listed_s": listed[lo], "spawn_floor_s": floor[lo], "limit_s": limit,
             "ratio_to_floor": ratio(listed[lo], floor[lo]), "ratio_to_limit": ratio(listed[lo], limit),
             "met": listed[lo] <= limit}
    report.row(section, f"goal: first tools/list, N={lo}",
               f"{listed[lo] * 1000:.0f} ms = {first['ratio_to_floor']:.2f}× floor", "PASS" if first["met"] else "MISS",
               f"<= {COLD_FIRST_LIST_FACTOR:g}× floor + {COLD_FIRST_LIST_SLACK_S * 1000:.0f} ms "
               f"({limit * 1000:.0f} ms)", first["met"])
    share = {n: listed[n] - floor[n] for n in (lo, hi)}
    r = ratio(share[hi], share[lo])
    own = {"share_s": share, "ratio": r, "target": COLD_SHARE_TARGET, "met": r <= COLD_SHARE_TARGET}
    report.row(section, f"goal: troupe's share, N={hi} vs N={lo}",
               f"{r:.2f}× ({share[hi] * 1000:.0f} vs {share[lo] * 1000:.0f} ms)", "PASS" if own["met"] else "MISS",
               f"<= {COLD_SHARE_TARGET:g}× (listed minus spawn floor)", own["met"])
    return {"first_list_n1": first, "own_share_n_vs_1": own}


# ---------------------------------------------------------------- 4. meta-tools over a big catalogue

FILTER_P50_TARGET_MS = 5.0


def _filter_queries(n: int) -> dict:
    """From one match to all: bench_backend describes tool i as "Synthetic tool {i}: {word i%10} {word i//10%10}"."""
    return {"filter_tools query, 1 match": {"query": str(n // 2)},
            "filter_tools query, ~19% match": {"query": "delta foxtrot"},
            "filter_tools query, all match": {"query": "synthetic delta"},
            "filter_tools pattern glob": {"pattern": "big__t0*9"}}


def meta_tools(settings, report: Report) -> dict:
    n = settings.catalogue
    print(f"\n== 4. filter_tools and list_tools over {n} tools (troupe meta mode, stdio)", flush=True)
    section = f"4 meta-tools [{n} tools]"
    config = troupe_config("meta", [stdio_entry("big", bench_backend(n - 1))], mode="meta")
    with troupe_stdio("meta", config) as client:
        client.initialize()
        client.list_tools()  # tools/list waits for start-up to settle
        deadline = time.monotonic() + 180
        own = orjson.loads(client.call("list_core_tools", {}, timeout=60)["content"][0]["text"])["total"]
        while True:  # then the catalogue must hold the backend's tools (list_tools adds troupe's own)
            page = client.call("list_tools", {"limit": 1}, timeout=60)
            total = orjson.loads(page["content"][0]["text"])["total"] - own
            if total >= n:
                break
            if time.monotonic() > deadline:
                raise BenchError(f"troupe lists {total} tools, expected at least {n}")
            time.sleep(0.05)
        t0 = time.perf_counter()
        client.call("filter_tools", {"query": "delta foxtrot"}, timeout=60)
        index_s = time.perf_counter() - t0
        count, warm = settings.meta_calls, max(3, settings.meta_calls // 10)
        figures = {"ping (floor)": time_calls(lambda: client.request("ping"), count, warm)}
        queries = _filter_queries(n)
        for name, args in queries.items():
            figures[name] = time_calls(lambda a=args: client.call("filter_tools", a), count, warm)
        figures["list_tools limit 50"] = time_calls(lambda: client.call("list_tools", {"limit": 50}), count, warm)
    floor = figures["ping (floor)"]["p50_ms"]
    met = {name: figures[name]["p50_ms"] < FILTER_P50_TARGET_MS for name in queries}
    report.row(section, "first filter_tools (builds index)", ms(index_s * 1000))
    for name, f in figures.items():
        target, ok = ("", None)
        if name in met:
            target, ok = f"p50 < {FILTER_P50_TARGET_MS:.0f} ms", met[name]
        report.row(section, name, f"p50 {ms(f['p50_ms'])}  p99 {ms(f['p99_ms'])}",
                   "baseline" if name.startswith("ping") else f"{ratio(f['p50_ms'], floor):.1f}× ping", target, ok)
    return {"catalogue": total, "first_filter_s": index_s, "queries": queries, "paths": figures,
            "ratios": {k: ratio(v["p50_ms"], floor) for k, v in figures.items()},
            "target_filter_p50_ms": FILTER_P50_TARGET_MS, "met": met}


# ---------------------------------------------------------------- 5. memory

RSS_PER_BACKEND_TARGET_KIB = 100  # issue 31: growth per connected stdio backend
RSS_FRONT_TARGET_KIB = 40 * 1024  # issue 31: troupe alone at 50 backends
RSS_VS_MCP_PROXY_TARGET = 0.75  # … and at most this share of mcp-proxy's RSS in front of one backend


def _steady_rss(pid: int, settle: float) -> int:
    """One process's RSS once settled: the least of 3 samples (a transient allocation is not the footprint)."""
    time.sleep(settle)
    samples = []
    for _ in range(3):
        samples.append(rss_kib(pid))
        time.sleep(0.2)
    return min(samples)


def _rss_with(n: int, settle: float) -> int:
    names = [f"b{i:02d}" for i in range(n)]
    backend = bench_backend(COLD_TOOLS - 1)
    config = troupe_config(f"rss-{n}", [stdio_entry(s, backend) for s in names])
    with troupe_stdio(f"rss-{n}", config) as client:
        client.initialize()
        _until_listed(client, {f"{s}__echo" for s in names}, time.monotonic() + 180)
        for s in names:  # every connection has carried a call: steady state, not just connected
            client.call(f"{s}__echo", {"text": s}, timeout=60)
        return _steady_rss(client.pid, settle)  # troupe alone: backends are other processes


def _mcp_proxy_rss(settle: float) -> int:
    """mcp-proxy's own RSS in front of one backend (its child, the backend, not counted), as troupe's is taken."""
    proc, client, _ = _mcp_proxy_started("rss", 60.0)
    try:
        return _steady_rss(proc.pid, settle)
    finally:
        client.close()
        proc.stop()


def memory(settings, report: Report) -> dict:
    lo, hi = settings.rss_ns
    print(f"\n== 5. troupe's RSS with {lo} and {hi} connected backends (backends excluded)", flush=True)
    bytecode_first(report)
    section = "5 memory [bench_backend]"
    rss = {n: _rss_with(n, settings.rss_settle) for n in (lo, hi)}
    peer = _mcp_proxy_rss(settings.rss_settle) if have_mcp_proxy() else None
    per = (rss[hi] - rss[lo]) / (hi - lo)
    report.row(section, f"troupe RSS, {lo} backend", f"{rss[lo] / 1024:.1f} MiB", "baseline")
    report.row(section, f"troupe RSS, {hi} backends", f"{rss[hi] / 1024:.1f} MiB",
               f"{ratio(rss[hi], rss[lo]):.2f}× {lo}")
    if peer is None:
        report.row(section, NO_MCP_PROXY, f"no {MCP_PROXY}")
    else:
        report.row(section, "mcp-proxy RSS, 1 backend", f"{peer / 1024:.1f} MiB",
                   f"troupe N={lo} {ratio(rss[lo], peer):.2f}×")
    goals = {"front_rss": {"rss_kib": rss[hi], "target_kib": RSS_FRONT_TARGET_KIB,
                           "ratio": ratio(rss[hi], RSS_FRONT_TARGET_KIB), "met": rss[hi] <= RSS_FRONT_TARGET_KIB},
             "per_backend": {"kib": per, "target_kib": RSS_PER_BACKEND_TARGET_KIB,
                             "met": per < RSS_PER_BACKEND_TARGET_KIB}}
    if peer is None:  # no baseline: the goal is not met, never silently passed
        goals["vs_mcp_proxy"] = {"ratio": None, "target": RSS_VS_MCP_PROXY_TARGET, "met": False,
                                 "missing": NO_MCP_PROXY}
    else:
        r = ratio(rss[hi], peer)
        goals["vs_mcp_proxy"] = {"ratio": r, "mcp_proxy_kib": peer, "target": RSS_VS_MCP_PROXY_TARGET,
                                 "met": r <= RSS_VS_MCP_PROXY_TARGET}
    g = goals["front_rss"]
    report.row(section, f"goal: troupe RSS N={hi}", f"{rss[hi] / 1024:.1f} MiB = {g['ratio']:.2f}× target",
               "PASS" if g["met"] else "MISS", f"<= {RSS_FRONT_TARGET_KIB // 1024} MiB", g["met"])
    g = goals["vs_mcp_proxy"]
    report.row(section, f"goal: troupe RSS N={hi} / mcp-proxy N=1",
               "no baseline" if peer is None else f"{g['ratio']:.2f}×", "PASS" if g["met"] else "MISS",
               f"<= {RSS_VS_MCP_PROXY_TARGET:g}× mcp-proxy", g["met"])
    g = goals["per_backend"]
    report.row(section, "goal: growth per connected backend", f"{per:.0f} KiB", "PASS" if g["met"] else "MISS",
               f"< {RSS_PER_BACKEND_TARGET_KIB} KiB", g["met"])
    return {"rss_kib": rss, "mcp_proxy_rss_kib": peer, "per_backend_kib": per,
            "target_per_backend_kib": RSS_PER_BACKEND_TARGET_KIB, "goals": goals,
            "met": all(g["met"] for g in goals.values())}
