"""Resident memory (RSS) of troupe and its server processes, read from /proc (Linux; elsewhere
None): what a server costs while it runs, and what servers on demand save while they do not.

Read by edge code (Runtime.status), never inside an actor: one pass over /proc per report.
A stdio server runs in its own process group (Popen(start_new_session=True)), so its RSS is its
group's: a launcher (npx, uvx) and the runtime it starts count together.
"""
from __future__ import annotations

import os
from typing import Iterable

PROC = "/proc"
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _processes(proc: str = PROC) -> list[tuple[int, int, int, int]]:
    """(pid, ppid, pgrp, rss bytes) of every live process (zombies hold no memory)."""
    out = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:
            continue  # it ended meanwhile
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) < 22 or fields[0] == "Z":
            continue
        out.append((int(entry), int(fields[1]), int(fields[2]), int(fields[21]) * PAGE))
    return out


def usage(groups: Iterable[int], me: int | None = None, proc: str = PROC) -> dict | None:
    """{"troupe": its own RSS, "children": every descendant's, "total": both, "groups": {pgid: RSS}}
    in bytes, for the process groups asked (a server's pid is its group's id); None without /proc."""
    me = os.getpid() if me is None else me
    processes = _processes(proc)
    if not processes:
        return None
    wanted = set(groups)
    by_parent: dict[int, list[tuple[int, int]]] = {}
    own, per_group = 0, dict.fromkeys(wanted, 0)
    for pid, ppid, pgrp, rss in processes:
        by_parent.setdefault(ppid, []).append((pid, rss))
        if pid == me:
            own = rss
        if pgrp in wanted:
            per_group[pgrp] += rss
    children, todo = 0, [me]
    while todo:  # every descendant: a server's own children too, and a client's own upstreams
        for pid, rss in by_parent.get(todo.pop(), ()):
            children += rss
            todo.append(pid)
    return {"troupe": own, "children": children, "total": own + children, "groups": per_group}


def annotate(report: dict) -> None:
    """Add `rss_bytes` to each running server's entry of a status report and `memory` to the report."""
    servers = report.get("servers") or []
    pids = {entry["name"]: entry["pid"] for entry in servers if isinstance(entry.get("pid"), int)}
    found = usage(pids.values())
    if found is None:
        report["memory"] = None
        return
    for entry in servers:
        pid = pids.get(entry["name"])
        entry["rss_bytes"] = found["groups"].get(pid) if pid is not None else None
    report["memory"] = {"troupe_rss_bytes": found["troupe"], "children_rss_bytes": found["children"],
                        "total_rss_bytes": found["total"]}
