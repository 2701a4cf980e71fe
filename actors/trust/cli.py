"""`troupe approvals | approve NAME | deny NAME`: the operator's side of trust, offline or over HTTP.

Offline (no --url) the command reads the same files a troupe would (its config, the MCP
clients' config files, the registration store), executes nothing, and writes the decision
into the approvals file, which every running troupe reloads within about a second.
With --url it asks a running troupe over HTTP (the dashboard's routes, behind its token).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import Any

import orjson

from actors.ops import acts
from actors.settings import config as config_mod
from actors.trust import cli_running, ledger, running
from actors.trust import provenance as trust
from actors.trust.cli_running import approve_command
from actors.trust.report import server_row, withheld_rows
from actors.tells import tell

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SCAN_TIMEOUT = 30.0


def _parser(prog: str, with_name: bool) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"troupe {prog}")
    if with_name:
        p.add_argument("name", help="the server's name, as `troupe approvals` shows it")
        p.add_argument("--pid", type=int, help="the running troupe meant, when several have servers of that name")
    p.add_argument("--url", help="a running troupe's HTTP base URL (default: work on the files, offline)")
    p.add_argument("--token", default=os.environ.get("TROUPE_AUTH_TOKEN"), help="bearer token for --url")
    p.add_argument("--config", help="troupe config (default: the embedded default)")
    p.add_argument("--home", help="home directory whose client files are read (default $HOME)")
    p.add_argument("--project-root", dest="project_root", help="project directory (default cwd)")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def run(command: str, argv: list[str]) -> int:
    args = _parser(command, command != "approvals").parse_args(argv)
    try:
        if args.url:
            result = _remote(command, args)
        else:
            result = _local(command, args)
    except (LookupError, ValueError, ledger.LedgerError, OSError, cli_running.NotApplied) as exc:
        print(f"troupe {command}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if command != "approvals" and not args.url:  # over HTTP the running troupe records it itself
        acts.record_offline(result.get("config") or args.config, command, result["server"])
    if args.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    elif command == "approvals":
        print(render(result))
    else:
        where = f", recorded in {result['approvals_file']}" if result.get("approvals_file") else ""
        if result.get("applied_by"):
            where += f"; applied by the running troupe (pid {', '.join(map(str, result['applied_by']))})"
        elif result.get("note"):
            where += f"; {result['note']}"
        print(f"{result['server']}: {result['decision']} ({result.get('launch') or ''}){where}")
    return EXIT_OK


def render(rows: list[dict]) -> str:
    """Each row with the command that decides it, as it runs from any directory: its `config`
    and `options` (what else finds it: --url, --home, --project-root) are part of it."""
    if not rows:
        return "nothing waits for approval"
    out = []

    def command(verb: str, row: dict) -> str:
        return approve_command(verb, row["name"], row.get("config")) + row.get("options", "")
    for row in rows:
        if row["what"] == "server":
            out.append(f"{row['name']}  [{row['provenance']}] {row.get('launch') or ''}")
            if row.get("file"):
                out.append(f"    from {row['file']}")
            out.append(f"    {command('approve', row)}   |   {command('deny', row)}")
        else:
            out.append(f"{row['name']}  {row['what']} {row['item']!r} is {row['change']}; "
                       f"withheld until `{command('approve', row)}`")
            out.extend("    " + line for line in (row.get("diff") or "").splitlines())
    return "\n".join(out)


# ---------------------------------------------------------------- over HTTP

def _remote(command: str, args) -> Any:
    import requests
    base = args.url.rstrip("/")
    for suffix in ("/mcp", "/sse", "/status"):
        base = base[: -len(suffix)] if base.endswith(suffix) else base
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        if command == "approvals":
            resp = requests.get(base + "/api/approvals", headers=headers, timeout=10)
        else:
            # the guard wants a same-origin Origin on dashboard POSTs; this is that origin
            headers.update(Origin=base, **{"Content-Type": "application/json"})
            resp = requests.post(f"{base}/api/approvals/{args.name}/{command}", headers=headers, timeout=10)
    except requests.RequestException as exc:
        raise OSError(f"cannot reach {base}: {exc}") from None
    if resp.status_code != 200:
        raise LookupError(f"{base} answered {resp.status_code}: {resp.text[:200]}")
    body = resp.json()
    if command != "approvals":
        return body
    rows = body["approvals"]
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict):
            row["options"] = f" --url {shlex.quote(base)}"  # the token is never printed: --token or its env
    return rows


# ---------------------------------------------------------------- offline

def _local(command: str, args) -> Any:
    config = config_mod.load(args.config)
    home = args.home or config.discovery.get("home")
    path = config.approvals_file or ledger.default_path(os.path.expanduser(home) if home else None)
    # What running troupes have, from whatever config: their records sit beside the file (a
    # cluster's instances too, though the approvals themselves live in its Redis).
    records = running.live(path)
    book: Any = ledger.Ledger(path)
    if config.cluster is not None:  # a cluster's approvals live in its Redis, for every instance
        from actors.cluster.shared import SharedState
        book = SharedState(config.cluster).ledger(path)
    snapshot = ledger.snapshot(book.read(), 1)
    if command != "approvals":
        found = cli_running.matches(records, args.name, args.config, args.pid)
        if found:
            return cli_running.decide(command, args.name, found, book, path, shown=book.path)
    path = str(book.path)
    servers = list(config.servers) + list(_discovered(config, args))
    if command == "approvals":
        offline = waiting_offline(servers, snapshot)
        for row in offline:  # found from this config, home and project only: the command says them
            row["config"] = config_mod.file_of(config)
            row["options"] = _finding_options(args, row)
        return _merged(cli_running.rows(records, snapshot), offline)
    server = next((s for s in servers if s.name == args.name), None)
    if server is None:
        raise LookupError(f"no running troupe and no config here has a server named {args.name!r}; "
                          f"`troupe approvals` lists what waits")
    decision = ledger.APPROVED if command == "approve" else ledger.DENIED
    shown = trust.shown_launch(server)
    keys = trust.identity_keys(server)  # the shell's PATH may not be the troupe's that will start it

    def decided(data: dict) -> dict:
        return [dict(ledger.decide(data, key, server.name, decision, server.provenance, shown)) for key in keys][0]
    entry, _ = book.update(decided)
    return {"server": server.name, "decision": decision, "provenance": server.provenance, "launch": shown,
            "file": server.origin_file, "pinned": bool(entry.get("pinned")), "approvals_file": path,
            "note": "no running troupe has it: the decision applies when troupe starts it"}


def _finding_options(args, row: dict) -> str:
    """The options besides --config that found an offline row: --home as given, and the project
    for a project's server (found from that directory only)."""
    parts = []
    if args.home:
        parts += ["--home", os.path.abspath(os.path.expanduser(args.home))]
    if row.get("provenance") == trust.PROJECT:
        parts += ["--project-root", os.path.abspath(args.project_root or os.getcwd())]
    return "".join(f" {shlex.quote(p)}" for p in parts)


def _merged(from_running: list[dict], offline: list[dict]) -> list[dict]:
    """Rows of running troupes first; an offline row repeating one of them is dropped. A running
    troupe's row needs no --config (its record finds it) unless troupes of two configs share the
    name; an offline row keeps what found it."""
    key = lambda row: (row["name"], row["what"], row.get("item"), row.get("launch"))  # noqa: E731
    seen = {key(row) for row in from_running}
    configs: dict[str, set] = {}
    for row in from_running:
        configs.setdefault(row["name"], set()).add(row.get("config"))
    for row in from_running:
        if len(configs[row["name"]]) < 2:
            row.pop("config", None)
        elif row.get("config") is None:
            row["config"] = str(config_mod.DEFAULT_CONFIG)
    return from_running + [row for row in offline if key(row) not in seen]


def waiting_offline(servers, snapshot) -> list[dict]:
    rows = [server_row(s.name, s.provenance, s.origin_file, trust.shown_launch(s)) for s in servers
            if trust.verdict(s, snapshot.decisions) == trust.PENDING]
    by_name = {s.name: s for s in servers}
    for identity, held in snapshot.withheld.items():
        mine = by_name.get(held.get("name"))
        if mine is not None and trust.identity_key(mine) == identity:
            rows += withheld_rows(mine.name, mine.provenance, held)
    return rows


def _discovered(config, args) -> tuple:
    """The servers discovery would contribute, found by reading files only: no provider that
    executes anything (the PATH probe) and no health checks."""
    if not config.discovery.get("enabled", False):
        return ()
    import pykka

    from actors.events.bus import BusClient, EventBus
    from actors.discovery.engine import DiscoveryEngine
    from actors.discovery.messages import RunDiscovery
    from actors.discovery.settings import PATH_PROVIDER, parse
    section = dict(config.discovery)
    section.update(watch=False, interval=0, health={"enabled": False})
    settings = parse(section, home=args.home, project_root=args.project_root)
    section["providers"] = [p for p in settings.providers if p != PATH_PROVIDER]
    found: dict = {}

    def on_services(change) -> None:
        for cfg in change.added + change.updated:
            found[cfg.name] = cfg

    bus = engine = None
    try:
        bus = EventBus.start()
        engine = DiscoveryEngine.start(section, BusClient(bus), on_services, home=settings.home,
                                       project_root=settings.project_root,
                                       reserved_names=frozenset(s.name for s in config.servers), run_at_start=False)
        future = pykka.ThreadingFuture()
        if not tell(engine, RunDiscovery(future)):
            raise RuntimeError("the discovery engine stopped")
        future.get(timeout=SCAN_TIMEOUT)
    finally:
        for ref in (engine, bus):
            if ref is not None:
                try:
                    ref.stop(timeout=10)
                except Exception:
                    pass
    return tuple(found.values())
