"""Operator commands: status (table or JSON), check CONFIG, discover."""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

import orjson

from actors.ratelimit import report as rate_report
from actors.settings import config as config_mod

DEFAULT_URL = os.environ.get("TROUPE_URL", "http://127.0.0.1:8765")


def run(command: str, argv: list[str]) -> int:
    return {"status": status, "check": check, "discover": discover}[command](argv)


def base_url(url: str) -> str:
    """A running troupe's HTTP base from what a user typed: its base, /mcp, /sse or /status URL."""
    base = url.rstrip("/")
    for suffix in ("/mcp", "/sse", "/status"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def bearer_headers(token: str | None) -> dict:
    return {"Authorization": f"Bearer {token}"} if token else {}


def status(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="troupe status", description="Show a running troupe's status report.")
    p.add_argument("--url", default=DEFAULT_URL, help="troupe's HTTP base URL (or its /mcp URL)")
    p.add_argument("--json", action="store_true", help="print the raw JSON report")
    p.add_argument("--token", default=os.environ.get("TROUPE_AUTH_TOKEN"), help="bearer token, if one is set")
    args = p.parse_args(argv)
    import requests
    base, headers = base_url(args.url), bearer_headers(args.token)
    try:
        resp = requests.get(base + "/status", headers=headers, timeout=10)
    except requests.RequestException as exc:
        print(f"troupe status: cannot reach {base}: {exc}", file=sys.stderr)
        return 2
    if resp.status_code != 200:
        print(f"troupe status: {base}/status answered {resp.status_code}: {resp.text[:200]}", file=sys.stderr)
        return 2
    report = resp.json()
    if args.json:
        print(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    else:
        print(render_table(report))
    return 0 if report.get("ready") else 1


def render_table(report: dict) -> str:
    lines = [f"troupe {report.get('version', '')}  {'READY' if report.get('ready') else 'STARTING'}  "
             f"uptime {_duration(report.get('uptime_s', 0))}  mode {report.get('mode')}  {report.get('url') or ''}"]
    cols = ("SERVER", "STATE", "SINCE", "TRANSPORT", "PID/URL", "RSS", "TOOLS", "RES", "PROMPTS", "INFL", "RESTARTS",
            "WAKES", "P50 MS", "LAST ERROR")
    rows = []
    now = time.time()
    for s in report.get("servers", []):
        rows.append((s["name"], s["state"], _duration(now - s.get("since", now)) + " ago", s["transport"],
                     str(s.get("pid") or s.get("url") or "-"), _mib(s.get("rss_bytes")), str(s.get("tools", 0)),
                     str(s.get("resources", 0)), str(s.get("prompts", 0)), str(s.get("in_flight", 0)),
                     str(s.get("restarts", 0)), str(s["wakes"]) if s.get("start") == "on_demand" else "-",
                     str((s.get("latency_ms") or {}).get("p50") or "-"), (s.get("last_error") or "")[:60]))
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines.append(fmt.format(*cols))
    lines.extend(fmt.format(*r) for r in rows)
    if not rows:
        lines.append("(no servers)")
    for s in report.get("servers", []):
        if s.get("state") == "needs-auth":  # the link itself is long: `troupe auth NAME` prints it
            lines.append(f"{s['name']} needs a sign-in: troupe auth {s['name']}"
                         + (f"  ({s['auth_error']})" if s.get("auth_error") else ""))
    memory = report.get("memory")
    if isinstance(memory, dict):
        idle = sum(1 for s in report.get("servers", []) if s.get("state") == "idle")
        lines.append(f"memory: {_mib(memory.get('total_rss_bytes'))} RSS in all (troupe "
                     f"{_mib(memory.get('troupe_rss_bytes'))}, servers {_mib(memory.get('children_rss_bytes'))})"
                     + (f"; {idle} on-demand server(s) idle" if idle else ""))
    tasks = task_line(report.get("tasks"))
    if tasks:
        lines.append(tasks)
    rates = rate_report.line(report.get("rates"))
    if rates:
        lines.append(rates)
    disc = report.get("discovery")
    if isinstance(disc, dict) and disc:
        lines.append(f"discovery: {orjson.dumps(disc).decode()[:300]}")
    return "\n".join(lines)


def _mib(value) -> str:
    """Bytes as MiB for the table ("-" when unknown: a server not running, or no /proc)."""
    return f"{value / 1048576:.1f}M" if isinstance(value, (int, float)) else "-"


def task_line(tasks) -> str:
    """One line for the tasks section: held now by state, minted vs relayed, the per-client cap;
    empty until a task was created or refused (a troupe whose clients never ask for tasks)."""
    if not isinstance(tasks, dict) or not tasks:
        return ""
    if "error" in tasks:
        return f"tasks: {tasks['error']}"
    created, held = tasks.get("created") or {}, tasks.get("held") or {}
    refused = tasks.get("refused_at_cap") or 0
    if not (sum(created.values()) or sum(held.values()) or refused):
        return ""
    states = ", ".join(f"{n} {state}" for state, n in (tasks.get("by_state") or {}).items())
    extra = f"; {refused} refused at the cap" if refused else ""
    return (f"tasks: {states} ({held.get('minted', 0)} minted, {held.get('relayed', 0)} relayed; "
            f"cap {tasks.get('max_per_client')} per client{extra})")


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"


def check(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="troupe check", description="Validate a config file; print every problem.")
    p.add_argument("config", nargs="?", help="YAML or mcpServers JSON (default: the embedded default)")
    args = p.parse_args(argv)
    try:
        cfg = config_mod.load(args.config)
    except config_mod.ConfigError as exc:
        # File order reads best in an editor; problems without a line (unreadable file) first.
        for problem in sorted(exc.problems, key=_line_of):
            print(problem)
        print(f"{len(exc.problems)} problem(s) found", file=sys.stderr)
        return 1
    from actors.workflows.watcher import dir_problems
    workflows, problems = dir_problems(cfg.workflows_dir, cfg.workflows) if cfg.workflows_dir else (cfg.workflows, [])
    for problem in problems:  # each file's problems in line order
        print(problem)
    if problems:
        print(f"{len(problems)} problem(s) found", file=sys.stderr)
        return 1
    shown = f"{len(workflows)} workflows: {', '.join(w.name for w in workflows)}; " if workflows else ""
    print(f"{cfg.path}: OK ({len(cfg.servers)} servers: {', '.join(s.name for s in cfg.servers) or 'none'}; "
          f"{shown}serve {cfg.serve.transport}/{cfg.serve.mode})")
    return 0


def _line_of(problem: str) -> int:
    match = re.match(r"^.*?:(\d+): ", problem)
    return int(match.group(1)) if match else 0


def discover(argv: list[str]) -> int:
    from actors.discovery import cli
    p = argparse.ArgumentParser(prog="troupe discover",
                                description="Find MCP servers (client config files, PATH), merge and probe them once.")
    p.add_argument("--config", help="troupe config whose `discovery:` settings apply")
    cli.add_arguments(p)
    args = p.parse_args(argv)
    try:
        args.config = config_mod.load(args.config)
    except config_mod.ConfigError as exc:
        print("\n".join(exc.problems), file=sys.stderr)
        return 2
    return cli.run(args)
