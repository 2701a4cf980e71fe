"""--profile of scripts/bench.py: py-spy attached to a running troupe while it serves one workload at a time."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _bench_modern import ModernHttpRpc
from _bench_paths import (bench_backend, everything_stdio, have_everything, stdio_entry, troupe_config, troupe_http,
                          troupe_stdio)
from _bench_report import Report
from _bench_rpc import LOGS, BenchError, HttpRpc, Proc

GROUPS = (("gevent/", "gevent"), ("pykka/", "pykka"), ("jsonschema", "jsonschema"), ("loguru/", "loguru"),
          ("orjson", "orjson"), ("importlib", "imports"))


def _py_spy() -> str | None:
    """py-spy on PATH, else pip-installed now (a profiling tool only: never a dependency of troupe)."""
    found = shutil.which("py-spy")
    if found:
        return found
    try:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "py-spy"], check=True, timeout=300,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except (subprocess.SubprocessError, OSError):
        return None
    return shutil.which("py-spy")


def _group(frame: str) -> str:
    """Which part of the stack a frame belongs to: troupe's module, a library, or the stdlib."""
    where = frame[frame.rfind("(") + 1:].rstrip(")")
    if where.startswith("actors/"):
        return where.rsplit(":", 1)[0]
    return next((name for key, name in GROUPS if key in where), "stdlib/other")


def summarise(raw: Path, top: int = 25) -> tuple[str, dict]:
    """Own and inclusive shares per function, and own share per module/library, from collapsed stacks."""
    own, total, groups, samples = Counter(), Counter(), Counter(), 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        own[frames[-1]] += n
        groups[_group(frames[-1])] += n
        for frame in set(frames):
            total[frame] += n
    if not samples:
        return "  no samples (troupe was idle)\n", {}
    lines = [f"  {samples} samples (idle excluded)", "  own time by module / library:"]
    lines += [f"    {n / samples:6.1%}  {g}" for g, n in groups.most_common(12)]
    lines += [f"  top {top} functions by own time:"]
    lines += [f"    {n / samples:6.1%}  {f}" for f, n in own.most_common(top)]
    lines += [f"  top {top} functions by inclusive time:"]
    lines += [f"    {n / samples:6.1%}  {f}" for f, n in total.most_common(top)]
    data = {"samples": samples, "own_by_group": {g: n / samples for g, n in groups.most_common()},
            "top_own": {f: n / samples for f, n in own.most_common(top)}}
    return "\n".join(lines) + "\n", data


def _front(front: str, slug: str, config: Path):
    """(client, troupe's pid, stop) for a workload's front: stdio, or HTTP in the legacy or the modern era."""
    if front == "stdio":
        client = troupe_stdio(f"profile-{slug}", config)
        try:
            client.initialize()
        except Exception:
            client.stop()
            raise
        return client, client.pid, client.stop
    proc, url = troupe_http(f"profile-{slug}", config)
    http = ModernHttpRpc(url) if front == "http-modern" else HttpRpc(url)

    def stop() -> None:
        http.close()
        proc.stop()
    try:
        http.initialize()
    except Exception:
        stop()
        raise
    return http, proc.pid, stop


def _profile_one(spy: str, slug: str, label: str, servers: list[dict], mode: str, front: str, workload,
                 seconds: float) -> tuple[str, dict]:
    """Start troupe, settle it, attach py-spy for `seconds` while `workload(client)` runs back to back."""
    raw = LOGS / f"profile-{slug}.collapsed"
    client, pid, stop = _front(front, slug, troupe_config(f"profile-{slug}", servers, mode=mode))
    try:
        client.list_tools()
        workload(client)  # warm: first calls build caches (the filter index) outside the profile
        spy_proc = Proc([spy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds))),
                         "--rate", "1000", "--nonblocking", "--function", "--format", "raw", "-o", str(raw)],
                        label=f"py-spy-{slug}", pipes=False)
        try:
            time.sleep(0.3)  # let py-spy attach before the measured calls
            calls, deadline = 0, time.monotonic() + seconds + 30
            while spy_proc.proc.poll() is None and time.monotonic() < deadline:
                workload(client)
                calls += 1
            spy_proc.proc.wait(timeout=30)
        finally:
            spy_proc.stop()
    finally:
        stop()
    if not raw.exists():
        raise BenchError(f"py-spy wrote no profile for {label}:\n{spy_proc.tail()}")
    text, data = summarise(raw)
    return f"== {label}: {calls} calls in {seconds:.0f} s\n{text}", {**data, "calls": calls, "collapsed": str(raw)}


def workloads(settings) -> list[tuple]:
    """(slug, label, servers, mode, front, workload) of every workload --profile can run, in order."""
    small = bench_backend()
    echo_small = [stdio_entry("b", small, prefix="")]

    def call_small(c) -> None:
        c.call(small.tool, small.arguments)
    out = [("echo-bench", "echo stdio→stdio [bench_backend]", echo_small, "flat", "stdio", call_small)]
    if have_everything():
        ev = everything_stdio()
        out.append(("echo-everything", "echo stdio→stdio [server-everything]",
                    [stdio_entry("b", ev, prefix="")], "flat", "stdio", lambda c: c.call(ev.tool, ev.arguments)))
    # The same call through the HTTP front in each era: where a modern request costs more than a legacy one.
    out.append(("echo-http-legacy", "echo HTTP→stdio, legacy session [bench_backend]", echo_small, "flat",
                "http-legacy", call_small))
    out.append(("echo-http-modern", "echo HTTP→stdio, modern (2026-07-28) [bench_backend]", echo_small, "flat",
                "http-modern", call_small))
    big, n = [stdio_entry("big", bench_backend(settings.catalogue - 1))], settings.catalogue
    out.append(("filter-tools", f"filter_tools query over {n} tools", big, "meta", "stdio",
                lambda c: c.call("filter_tools", {"query": "delta foxtrot synthetic"})))
    out.append(("list-tools", f"list_tools limit 50 over {n} tools", big, "meta", "stdio",
                lambda c: c.call("list_tools", {"limit": 50})))
    return out


SLUGS = ("echo-bench", "echo-everything", "echo-http-legacy", "echo-http-modern", "filter-tools", "list-tools")


def profile(settings, out_path: Path, report: Report, only: tuple[str, ...] = ()) -> dict:
    """Profile troupe on the latency workloads (section 1), the same call through the HTTP front in both
    eras, and the meta-tools over a big catalogue (section 4); `only` keeps the workloads of those slugs."""
    print("\n== profile: py-spy attached to troupe, one workload at a time", flush=True)
    spy = _py_spy()
    if spy is None:
        report.note("--profile: py-spy unavailable (pip install py-spy); no profile written")
        return {"error": "py-spy unavailable"}
    texts, out = [], {}
    for slug, label, servers, mode, front, workload in workloads(settings):
        if only and slug not in only:
            continue
        print(f"  profiling {label}", flush=True)
        text, data = _profile_one(spy, slug, label, servers, mode, front, workload, settings.profile_seconds)
        texts.append(text)
        out[label] = data
    out_path.write_text("troupe profile (py-spy, samples of troupe's process only)\n\n" + "\n".join(texts))
    report.note(f"profile summary written to {out_path}")
    return {"summary_file": str(out_path), "workloads": out}
