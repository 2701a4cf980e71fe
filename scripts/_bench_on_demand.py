"""Section 9 of scripts/bench.py (and scripts/bench_on_demand.py on its own): servers on demand.

RSS of troupe plus every child with 20 stdio servers (FastMCP and server-everything) always on
against the same 20 on demand at rest; then, per backend, the first call's latency on a stopped
server as a ratio to a warm call and to the server's own spawn-and-handshake time, all measured in
the same run. Goal: first call <= 1.1 × spawn-and-handshake + one warm call.
"""
from __future__ import annotations

import statistics
import sys
import tempfile
import time

import orjson

from _bench_paths import EVERYTHING, ROOT, Backend, stdio_entry, troupe_cmd, troupe_config
from _bench_report import Report, ms, ratio
from _bench_rpc import PYTHON, BenchError, StdioRpc

sys.path.insert(0, str(ROOT))
from actors.supervision.memory import usage  # noqa: E402  (the figure troupe status shows)

SERVERS, FASTMCP = 20, 6
FIRST_CALL_GOAL = 1.1  # × spawn-and-handshake, plus one warm call


def _demo() -> Backend:
    return Backend("fastmcp", (PYTHON, "-m", "tests.servers.fastmcp_demo"), "greet", {"name": "Ada"})


def _everything() -> Backend:
    return Backend("server-everything", (str(EVERYTHING), "stdio"), "echo", {"message": "hello"})


def _backend(i: int, fastmcp: int) -> Backend:
    return _demo() if i < fastmcp else _everything()


def _entries(on_demand: bool, n: int, fastmcp: int, idle_stop: float = 300.0) -> list[dict]:
    out = []
    for i in range(n):
        backend = _backend(i, fastmcp)
        entry = stdio_entry(f"s{i:02d}", backend)
        if on_demand:
            entry.update(start="on_demand", idle_stop=idle_stop)
        out.append(entry)
    return out


def _status(client: StdioRpc) -> dict:
    reply = client.call("core_status", {}, timeout=30)
    return orjson.loads(reply["content"][0]["text"])


def _until(client: StdioRpc, check, budget: float, what: str) -> dict:
    deadline = time.monotonic() + budget
    while True:
        status = _status(client)
        if check(status):
            return status
        if time.monotonic() > deadline:
            raise BenchError(f"{what} not reached in {budget:g} s")
        time.sleep(0.05)


def _idle(status: dict, names=None) -> bool:
    return all(s["state"] == "idle" for s in status["servers"] if names is None or s["name"] in names)


def _total_rss(pid: int, samples: int = 3) -> int:
    """troupe and every descendant, bytes (the least of a few samples: a GC spike is not the figure)."""
    figures = []
    for _ in range(samples):
        found = usage((), me=pid)
        if found is None:
            raise BenchError("no /proc: RSS cannot be read here")
        figures.append(found["total"])
        time.sleep(0.2)
    return min(figures)


def _rss_always(settle: float, n: int, fastmcp: int) -> int:
    config = troupe_config("od-always", _entries(False, n, fastmcp))
    with StdioRpc(troupe_cmd(config), label="troupe-od-always", env={"TROUPE_CONFIG_DIR": tempfile.mkdtemp()}) as c:
        c.initialize()
        _until(c, lambda s: all(x["state"] == "ready" for x in s["servers"]), 240, f"{n} servers ready")
        for i in range(n):  # every server has carried a call: steady state
            backend = _backend(i, fastmcp)
            c.call(f"s{i:02d}__{backend.tool}", backend.arguments, timeout=60)
        time.sleep(settle)
        return _total_rss(c.pid)


def _rss_on_demand(settle: float, approvals: str, n: int, fastmcp: int) -> tuple[int, int]:
    """(RSS at rest in the troupe that learned the lists, RSS of a new troupe serving them kept)."""
    config = troupe_config("od-learn", _entries(True, n, fastmcp))
    with StdioRpc(troupe_cmd(config), label="troupe-od-learn", env={"TROUPE_CONFIG_DIR": approvals}) as c:
        c.initialize()
        _until(c, _idle, 240, f"{n} servers idle after learning")
        time.sleep(settle)
        learned = _total_rss(c.pid)
    with StdioRpc(troupe_cmd(config), label="troupe-od-rest", env={"TROUPE_CONFIG_DIR": approvals}) as c:
        c.initialize()
        status = _until(c, _idle, 60, f"{n} servers idle from their kept lists")
        if sum(s["tools"] for s in status["servers"]) == 0:
            raise BenchError("the kept lists were not served")
        time.sleep(settle)
        return learned, _total_rss(c.pid)


def _direct(backend: Backend, listed: bool, called: bool) -> float:
    """The server's own cost, with no troupe: spawn it, complete initialize, and (`listed`) read its
    four lists as troupe does before its first call, then (`called`) make the call (seconds)."""
    began = time.perf_counter()
    with StdioRpc(list(backend.cmd), label=f"direct-{backend.label}") as server:
        server.initialize(timeout=60)
        if listed:
            for method in ("tools/list", "resources/list", "resources/templates/list", "prompts/list"):
                server.request(method, {}, timeout=60)
        if called:
            server.call(backend.tool, backend.arguments, timeout=60)
        return time.perf_counter() - began


def _interleaved(backend: Backend, reps: int, warm_calls: int) -> dict:
    """Per repetition, in turn (so a load that drifts weighs on each figure alike): the server's
    spawn-and-handshake alone, troupe's first call on it stopped (then warm calls), the server's
    spawn, handshake and call with no list, and spawn, handshake, lists and call (troupe's own work)."""
    entry = stdio_entry("od", backend)
    entry.update(start="on_demand", idle_stop=0.5)
    config = troupe_config(f"od-first-{backend.label}", [entry])
    figures: dict = {"spawn_handshake": [], "first": [], "warm": [], "direct_call": [], "direct_lists_call": []}
    tool = f"od__{backend.tool}"
    with StdioRpc(troupe_cmd(config), label=f"troupe-od-first-{backend.label}",
                  env={"TROUPE_CONFIG_DIR": tempfile.mkdtemp()}) as c:
        c.initialize()
        for _ in range(reps):
            figures["spawn_handshake"].append(_direct(backend, False, False))
            _until(c, _idle, 60, "the server idle")
            began = time.perf_counter()
            c.call(tool, backend.arguments, timeout=60)
            figures["first"].append(time.perf_counter() - began)
            for _ in range(warm_calls):
                began = time.perf_counter()
                c.call(tool, backend.arguments, timeout=60)
                figures["warm"].append(time.perf_counter() - began)
            figures["direct_call"].append(_direct(backend, False, True))
            figures["direct_lists_call"].append(_direct(backend, True, True))
    return figures


def run(settings, report: Report) -> dict:
    quick = settings.latency_rounds < 10  # --quick: 4 servers, one round (the smoke test's budget)
    reps, n, fastmcp = (1, 4, 1) if quick else (9, SERVERS, FASTMCP)
    print(f"\n== 9. servers on demand: RSS of troupe and children with {n} servers, and the first call",
          flush=True)
    if not EVERYTHING.exists():
        raise BenchError(f"server-everything not installed at {EVERYTHING}")
    section = "9 on demand"
    out: dict = {}
    approvals = tempfile.mkdtemp()
    always = _rss_always(settings.rss_settle, n, fastmcp)
    learned, rest = _rss_on_demand(settings.rss_settle, approvals, n, fastmcp)
    out["servers"] = n
    out["rss_bytes"] = {"always_on": always, "on_demand_after_learning": learned, "on_demand_at_rest": rest}
    report.row(section, f"{n} servers always on, troupe+children", f"{always / 1048576:.1f} MiB", "baseline")
    report.row(section, f"{n} on demand at rest (kept lists)", f"{rest / 1048576:.1f} MiB",
               f"{ratio(rest, always):.3f}× always on")
    report.row(section, f"{n} on demand after learning", f"{learned / 1048576:.1f} MiB",
               f"{ratio(learned, always):.3f}× always on")
    out["first_call"] = {}
    for backend in (_everything(), _demo()):
        got = _interleaved(backend, reps, 5 if quick else 20)
        p50 = {key: statistics.median(values) for key, values in got.items()}
        spawn, f50, w50 = p50["spawn_handshake"], p50["first"], p50["warm"]
        goal = FIRST_CALL_GOAL * spawn + w50
        met = f50 <= goal
        out["first_call"][backend.label] = {"samples_s": got, "p50_s": p50, "goal_s": goal, "met": met}
        label = f"[{backend.label}]"
        report.row(section, f"spawn+handshake alone {label}", ms(spawn * 1000), "baseline")
        report.row(section, f"warm call through troupe {label}", ms(w50 * 1000), "")
        report.row(section, f"direct spawn+handshake+call {label}", ms(p50["direct_call"] * 1000),
                   f"{ratio(p50['direct_call'], spawn):.2f}× spawn+handshake")
        report.row(section, f"direct spawn+handshake+lists+call {label}", ms(p50["direct_lists_call"] * 1000),
                   f"{ratio(p50['direct_lists_call'], spawn):.2f}× spawn+handshake")
        report.row(section, f"first call, server stopped {label}", ms(f50 * 1000),
                   f"{ratio(f50, w50):.0f}× warm, {ratio(f50, spawn):.2f}× spawn+handshake, "
                   f"{ratio(f50, p50['direct_lists_call']):.2f}× direct lists+call",
                   "<= 1.1× spawn + warm", met)
    return out
