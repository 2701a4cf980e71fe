#!/usr/bin/env python
"""Where troupe's memory goes: live allocations by package at N=1 and N=50 stdio backends, and per backend.

A diagnostic for issue 31 (scripts/bench.py section 5 gives the RSS goals; this says what makes them up).

Usage:
  python scripts/memory_profile.py                        # N=1 and N=50, then the growth per backend
  python scripts/memory_profile.py --ns 1,20 --top 40 --lines 30 --json memory-profile.json
  python scripts/memory_profile.py --frames 30            # deeper tracebacks (slower, more overhead)

How: `python -m compileall -q actors tests/servers` runs first (troupe starts from bytecode, as an
installed package does). Then, for each N, a fresh subprocess (this script with --child) patches
gevent, starts tracemalloc at once, and starts troupe in-process through actors.embed.start (the same
Runtime, plus one Session as a stdio client would have; discovery off) over N tests/servers/bench_backend
servers with 4 synthetic tools each (as bench sections 3 and 5). At steady state (start-up settled, one
echo call through each backend, --settle seconds, gc.collect()) it takes a snapshot and its RSS.

Each live allocation is charged to the innermost frame of its traceback outside the import machinery
(<frozen importlib...>), and that frame's file to a group:
  site-packages/<top>/...  -> "<top>"            (pydantic, gevent, loguru, ...)
  actors/<sub>/... in ROOT -> "actors.<sub>"     (actors/<mod>.py -> "actors.<mod>")
  the standard library     -> "stdlib:<module>"  (frozen stdlib modules too: "stdlib:os")
  else                     -> its path (relative to the repository when inside it)
An allocation made while importing (module code objects, which marshal builds) gets " (imports)" after
the group of the frame that ran the import statement: "pydantic (imports)" is mostly pydantic's own
submodules, "actors.runtime (imports)" the modules actors/runtime.py pulls in first. If every frame kept
is import machinery, the group says so (raise --frames).

Each N also runs once without tracemalloc, for the plain RSS. Printed for each N: that RSS; the
traced run's RSS (much higher: tracemalloc's own memory, and the heap left behind by tracing every
allocation of start-up), the live traced total, the top groups; and the same memory by the innermost
frame in actors/ (who in troupe made gevent, pykka or dataclasses allocate it). Then the per-backend difference
((N_hi - N_lo) / (hi - lo)) of RSS and of each group, and the source lines that grow the most per backend.
--json writes every group and line figure of both runs and the differences.
"""
from __future__ import annotations

import sys

NFRAMES = 16  # enough to climb out of one nested import (about 7 importlib frames per level)

if __name__ == "__main__" and "--child" in sys.argv:
    # First thing in the measured process: troupe needs a patched process, and tracemalloc sees only
    # what is allocated after it starts (so every import of troupe's is counted).
    from gevent import monkey
    monkey.patch_all()
    if "--no-trace" not in sys.argv:
        import tracemalloc
        tracemalloc.start(int(sys.argv[sys.argv.index("--frames") + 1]) if "--frames" in sys.argv else NFRAMES)

import argparse  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sysconfig  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import orjson  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = 4  # synthetic tools per backend besides echo, as bench sections 3 and 5
STARTUP_TIMEOUT = 240.0
CHILD_TIMEOUT = 420.0


# ---------------------------------------------------------------- the measured process

def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


class Grouper:
    """Maps a traceback to (group, "file:line") as the docstring says."""

    def __init__(self) -> None:
        self.root = str(ROOT) + os.sep
        self.actors = str(ROOT / "actors") + os.sep
        paths = sysconfig.get_paths()
        self.site = sorted({paths["purelib"] + os.sep, paths["platlib"] + os.sep}, key=len, reverse=True)
        self.stdlib = sorted({paths["stdlib"] + os.sep, paths["platstdlib"] + os.sep}, key=len, reverse=True)
        self._files: dict[str, str] = {}

    @staticmethod
    def _importing(filename: str) -> bool:
        return filename.startswith(("<frozen importlib", "<frozen zipimport")) or (
            f"{os.sep}importlib{os.sep}" in filename and "site-packages" not in filename)

    def file_group(self, filename: str) -> str:
        group = self._files.get(filename)
        if group is None:
            group = self._files[filename] = self._classify(filename)
        return group

    def _classify(self, filename: str) -> str:
        if filename.startswith("<frozen "):
            return "stdlib:" + filename[len("<frozen "):-1].split(".")[0]
        for site in self.site:  # site-packages sits inside the stdlib directory: look there first
            if filename.startswith(site):
                top = filename[len(site):].split(os.sep)[0]
                return top[:-3] if top.endswith(".py") else top
        if filename.startswith(self.actors):
            sub = filename[len(self.actors):].split(os.sep)[0]
            return "actors." + (sub[:-3] if sub.endswith(".py") else sub)
        for lib in self.stdlib:
            if filename.startswith(lib):
                top = filename[len(lib):].split(os.sep)[0]
                return "stdlib:" + (top[:-3] if top.endswith(".py") else top)
        if filename.startswith(self.root):
            return filename[len(self.root):]
        return filename

    def charge(self, traceback) -> tuple[str, str]:
        imports = False
        for frame in reversed(traceback):  # the most recent frame last
            if self._importing(frame.filename):
                imports = True
                continue
            where = f"{self._short(frame.filename)}:{frame.lineno}"
            group = self.file_group(frame.filename)
            return (f"{group} (imports)" if imports else group), where
        return "import machinery (frames cut: raise --frames)", traceback[-1].filename

    def troupe_caller(self, traceback) -> str:
        """The innermost frame in actors/ (who in troupe made a library allocate), "+imports" when importing."""
        imports = False
        for frame in reversed(traceback):
            if self._importing(frame.filename):
                imports = True
            elif frame.filename.startswith(self.actors):
                group = self.file_group(frame.filename)
                return f"{group} (imports)" if imports else group
        return "(no actors frame in the traceback)"

    def _short(self, filename: str) -> str:
        for prefix in (*self.site, self.root, *self.stdlib):
            if filename.startswith(prefix):
                return filename[len(prefix):]
        return filename


def child(config: str, n: int, settle: float, out: str) -> None:
    """In the measured process: start troupe, reach steady state, write the snapshot's figures to `out`
    (only the RSS when tracemalloc is off: the plain figure, without tracing's own cost)."""
    import tracemalloc

    import gevent
    sys.path.insert(0, str(ROOT))  # this checkout's actors, whatever an editable install points at
    from actors import embed, logs
    logs.setup("WARNING", False)  # as scripts/bench.py runs troupe: its logging out of the picture

    t0 = time.perf_counter()
    troupe = embed.start(config, discovery=False)
    try:
        if not troupe.wait_ready(STARTUP_TIMEOUT):
            raise SystemExit(f"troupe did not settle within {STARTUP_TIMEOUT:.0f} s")
        settled_s = time.perf_counter() - t0
        for i in range(n):  # every connection has carried a call: steady state, not just connected
            result = troupe.call_tool(f"b{i:02d}__echo", {"text": "x"})
            if result.get("isError"):
                raise SystemExit(f"b{i:02d}__echo failed: {result}")
        gevent.sleep(settle)
        gc.collect()
        if not tracemalloc.is_tracing():
            Path(out).write_bytes(orjson.dumps({"n": n, "settled_s": time.perf_counter() - t0, "rss_kib": _rss_kib()}))
            return
        snapshot = tracemalloc.take_snapshot()
        rss = _rss_kib()
        overhead = tracemalloc.get_tracemalloc_memory()
        groups: dict[str, list[int]] = {}
        lines: dict[str, list[int]] = {}
        callers: dict[str, list[int]] = {}
        grouper = Grouper()
        for stat in snapshot.statistics("traceback"):
            group, where = grouper.charge(stat.traceback)
            for table, key in ((groups, group), (lines, f"{group}\t{where}"),
                               (callers, grouper.troupe_caller(stat.traceback))):
                entry = table.setdefault(key, [0, 0])
                entry[0] += stat.size
                entry[1] += stat.count
        figures = {"n": n, "settled_s": settled_s, "rss_kib": rss, "tracemalloc_kib": overhead / 1024,
                   "traced_kib": sum(size for size, _ in groups.values()) / 1024,
                   "groups": groups, "lines": lines, "callers": callers}
        Path(out).write_bytes(orjson.dumps(figures))
    finally:
        troupe.stop()


# ---------------------------------------------------------------- the driver

def _measure(n: int, args, logs: Path, traced: bool) -> dict:
    from _bench_paths import bench_backend, stdio_entry, troupe_config
    backend = bench_backend(TOOLS)
    config = troupe_config(f"memory-profile-{n}", [stdio_entry(f"b{i:02d}", backend) for i in range(n)])
    out = logs / f"memory-profile-{n}-{'traced' if traced else 'plain'}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--config", str(config), "--n", str(n),
           "--settle", str(args.settle), "--frames", str(args.frames), "--child-out", str(out),
           *(() if traced else ("--no-trace",))]
    print(f"measuring N={n} {'with tracemalloc' if traced else 'plain (RSS only)'} ...", flush=True)
    done = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=CHILD_TIMEOUT)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"N={n}: the measured process failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return orjson.loads(out.read_bytes())


def _kib(size: float) -> str:
    return f"{size / 1024:,.1f}"


VIEWS = (("groups", "by package (the innermost frame outside imports)"),
         ("callers", "by the innermost troupe frame (who in actors/ made it)"))


def _print_table(title: str, table: dict, top: int, traced: float) -> None:
    print(f"  {title:<52} {'KiB':>10} {'blocks':>9} {'share':>6}")
    ranked = sorted(table.items(), key=lambda kv: kv[1][0], reverse=True)
    for group, (size, count) in ranked[:top]:
        print(f"    {group:<50} {_kib(size):>10} {count:>9,} {size / 1024 / traced:>6.1%}")
    rest = ranked[top:]
    if rest:
        print(f"    {f'({len(rest)} more)':<50} {_kib(sum(v[0] for _, v in rest)):>10} "
              f"{sum(v[1] for _, v in rest):>9,}")


def _print_run(fig: dict, top: int) -> None:
    traced = fig["traced_kib"]
    print(f"\nN={fig['n']}: RSS {fig['plain_rss_kib'] / 1024:.1f} MiB untraced. Traced run: RSS "
          f"{fig['rss_kib'] / 1024:.1f} MiB (tracemalloc's own {fig['tracemalloc_kib'] / 1024:.1f} MiB, and the "
          f"heap its start-up left), live traced {traced / 1024:.1f} MiB; settled in {fig['settled_s']:.2f} s")
    for key, title in VIEWS:
        _print_table(title, fig[key], top, traced)


def _growth(lo: dict, hi: dict, key: str) -> dict[str, tuple[float, float]]:
    """Per backend: (bytes, blocks) of every key in either run."""
    span = hi["n"] - lo["n"]
    out = {}
    for name in set(lo[key]) | set(hi[key]):
        a, b = lo[key].get(name, [0, 0]), hi[key].get(name, [0, 0])
        out[name] = ((b[0] - a[0]) / span, (b[1] - a[1]) / span)
    return out


def _print_growth(lo: dict, hi: dict, top: int, lines: int) -> dict:
    span = hi["n"] - lo["n"]
    rss = (hi["rss_kib"] - lo["rss_kib"]) / span
    own = (hi["tracemalloc_kib"] - lo["tracemalloc_kib"]) / span
    traced = (hi["traced_kib"] - lo["traced_kib"]) / span
    plain = (hi["plain_rss_kib"] - lo["plain_rss_kib"]) / span
    print(f"\nper backend, (N={hi['n']} - N={lo['n']}) / {span}: RSS untraced {plain:+.1f} KiB; traced run: RSS "
          f"{rss:+.1f} KiB, of which tracemalloc's own {own:+.1f} KiB; live traced {traced:+.1f} KiB")
    out: dict = {"plain_rss_kib": plain, "rss_kib": rss, "tracemalloc_kib": own, "traced_kib": traced}
    for key, title in VIEWS:
        growth = _growth(lo, hi, key)
        print(f"  {title:<52} {'KiB/backend':>12} {'blocks/backend':>15}")
        for group, (size, count) in sorted(growth.items(), key=lambda kv: abs(kv[1][0]), reverse=True)[:top]:
            print(f"    {group:<50} {size / 1024:>+12.2f} {count:>+15.1f}")
        out[key] = {g: {"bytes": s, "blocks": c} for g, (s, c) in growth.items() if s or c}
    by_line = _growth(lo, hi, "lines")
    print(f"  top {lines} source lines by growth per backend (the innermost frame outside imports)")
    print(f"    {'KiB/backend':>12} {'blocks':>8}  {'group':<28} where")
    for key, (size, count) in sorted(by_line.items(), key=lambda kv: kv[1][0], reverse=True)[:lines]:
        group, where = key.split("\t", 1)
        print(f"    {size / 1024:>+12.2f} {count:>+8.1f}  {group:<28} {where}")
    out["lines"] = {k.replace("\t", " "): {"bytes": s, "blocks": c} for k, (s, c) in by_line.items() if s or c}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=str(__doc__).splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--ns", default="1,50", help="two backend counts, comma-separated (default 1,50)")
    p.add_argument("--top", type=int, default=25, help="groups shown per table")
    p.add_argument("--lines", type=int, default=20, help="source lines shown by growth per backend")
    p.add_argument("--settle", type=float, default=1.0, help="seconds at rest before the snapshot")
    p.add_argument("--frames", type=int, default=NFRAMES, help="tracemalloc traceback depth")
    p.add_argument("--json", help="write every figure here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--config", help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--no-trace", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.config, args.n, args.settle, args.child_out)
        return 0
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    if len(ns) != 2 or ns[0] >= ns[1] or ns[0] < 1:
        p.error("--ns takes two counts, the smaller first, e.g. 1,50")
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file
    from _bench_paths import compile_sources
    from _bench_rpc import LOGS
    took, ok = compile_sources()
    print(f"compileall of actors and tests/servers: {'done' if ok else 'FAILED'} in {took:.1f} s "
          "(troupe and the backends start from bytecode, as installed)")
    try:
        runs = []
        for n in ns:
            plain = _measure(n, args, LOGS, traced=False)
            runs.append({**_measure(n, args, LOGS, traced=True), "plain_rss_kib": plain["rss_kib"],
                         "plain_settled_s": plain["settled_s"]})
        for fig in runs:
            _print_run(fig, args.top)
        growth = _print_growth(runs[0], runs[1], args.top, args.lines)
        if args.json:
            Path(args.json).write_bytes(orjson.dumps({"runs": runs, "per_backend": growth},
                                                     option=orjson.OPT_INDENT_2))
            print(f"\nfigures written to {args.json}")
    finally:
        shutil.rmtree(LOGS, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
