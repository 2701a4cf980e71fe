"""`troupe discover`: run the providers and a probe of each service once, print, stop everything."""
from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from collections.abc import Mapping
from typing import Any

import gevent.monkey
import pykka

from actors.events.bus import BusClient, EventBus
from actors.discovery.health import HealthChecker
from actors.discovery.engine import DiscoveryEngine
from actors.discovery.messages import CheckHealth, RunDiscovery
from actors.discovery.settings import parse
from actors.trust import ledger
from actors.discovery.clients import BY_NAME
from actors.trust import provenance as trust
from actors.published import Published
from actors.tells import tell

ASK_MARGIN = 5.0  # on top of the configured deadlines, for actor start-up and merging
STOP_TIMEOUT = 10.0
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `python -m actors.main discover` (the core adds --config itself)."""
    parser.add_argument("--home", help="home directory to search (default $HOME)")
    parser.add_argument("--project-root", dest="project_root", help="project directory (default cwd)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--no-probe", dest="probe", action="store_false", default=True,
                        help="execute nothing: no health probes and no PATH `--help` probe, "
                             "only config files are read")


def _options(args: Any, kwargs: Mapping) -> dict:
    opts: dict = {"home": None, "project_root": None, "json": False, "probe": True, "config": None}
    if args is not None:
        opts.update(vars(args) if isinstance(args, argparse.Namespace) else dict(args))
    opts.update(kwargs)
    return opts


def _stop(refs: list) -> None:
    # in parallel, then one bounded wait: a stuck actor must not hold the CLI
    futures = []
    for ref in refs:
        if ref is not None:
            futures.append(ref.stop(block=False))
    try:
        pykka.get_all(futures, timeout=STOP_TIMEOUT)
    except pykka.Timeout:
        print("troupe discover: some actors did not stop in time", file=sys.stderr)


def run(args: Any = None, /, **kwargs) -> int:
    """args: argparse.Namespace or mapping with home, project_root, json, probe, config
    (a troupe Config whose `discovery:` section is used). Returns the exit code."""
    opts = _options(args, kwargs)
    out = opts.get("stdout") or sys.stdout
    if not gevent.monkey.is_module_patched("threading"):
        print("troupe discover: gevent monkey-patching is required (run python -m actors.main discover)",
              file=sys.stderr)
        return EXIT_USAGE
    config = opts["config"]
    section = dict(getattr(config, "discovery", None) or {})
    # one shot: nothing periodic, nothing watched, our own checker with no schedule
    section.update(watch=False, interval=0)
    if not opts["probe"]:
        # --no-probe runs no program at all: not the PATH probe's `--help`, and no checker the
        # engine would otherwise start on its own
        for key in ("path_probe", "health"):
            sub = {} if section.get(key) is None else section[key]
            if isinstance(sub, Mapping):  # anything else is left for parse() to reject
                section[key] = {**sub, "enabled": False}
    try:
        settings = parse(section, home=opts["home"], project_root=opts["project_root"])
    except ValueError as exc:
        print(f"troupe discover: {exc}", file=sys.stderr)
        return EXIT_USAGE
    reserved = frozenset(s.name for s in getattr(config, "servers", ()) or ())
    bus = health = engine = None
    try:
        bus = EventBus.start()
        client = BusClient(bus)
        # The operator's approvals decide what may be probed: a probe runs the server.
        box = _trust_box(config, settings.home)
        if opts["probe"]:
            health = HealthChecker.start(client, interval=0, timeout=settings.health.timeout,
                                         concurrency=settings.health.concurrency,
                                         allowed=lambda cfg: trust.verdict(cfg, box.current.decisions) == trust.ALLOWED)
        engine = DiscoveryEngine.start(section, client, lambda change: None, home=settings.home,
                                       project_root=settings.project_root, reserved_names=reserved,
                                       health=health, run_at_start=False, trust_box=box)
        reply = pykka.ThreadingFuture()
        if not tell(engine, RunDiscovery(reply)):
            raise RuntimeError("the discovery engine stopped")
        report = reply.get(timeout=settings.deadline + ASK_MARGIN)
        checks: dict = {}
        if health is not None and report.services:
            rounds = math.ceil(len(report.services) / settings.health.concurrency)
            reply = pykka.ThreadingFuture()
            if not tell(health, CheckHealth(None, reply)):
                raise RuntimeError("the health checker stopped")
            checks = reply.get(timeout=rounds * (settings.health.timeout + ASK_MARGIN) + ASK_MARGIN)
    except pykka.Timeout:
        print("troupe discover: timed out", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        print(f"troupe discover: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        _stop([engine, health, bus])
    services = []
    for svc in report.services:
        check = checks.get(svc["name"])
        services.append({**svc, "healthy": check["healthy"] if check else None,
                         "health_detail": check["detail"] if check else "not probed",
                         "tools": check.get("tools", 0) if check else None})
    if opts["json"]:
        doc = {**report.to_json(), "services": services, "home": settings.home,
               "project_root": settings.project_root, "probed": bool(opts["probe"])}
        out.write(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    else:
        out.write(render(services, report, settings, _where(config, opts)))
    return EXIT_OK


def _trust_box(config, home: str) -> Published[ledger.TrustSnapshot]:
    """The approvals as a running troupe would read them (nothing approved if the file is unreadable)."""
    path = getattr(config, "approvals_file", None) or ledger.default_path(home)
    try:
        return Published.constant(ledger.snapshot(ledger.Ledger(path).read(), 1))
    except ledger.LedgerError as exc:
        print(f"troupe discover: {exc}; treating nothing as approved", file=sys.stderr)
        return Published.constant(ledger.TrustSnapshot())


def _health_text(svc: dict) -> str:
    if svc["healthy"] is None:
        return f"health unknown ({svc['health_detail']})"
    return ("healthy" if svc["healthy"] else "UNHEALTHY") + f" ({svc['health_detail']})"


def render_clients(report) -> list[str]:
    """Per client: each file read, the entries found in it, and each entry skipped with why."""
    if not report.files:
        return ["clients: no client config file found", ""]
    lines = ["clients:"]
    last = None
    for provider, file in report.files:
        if provider != last:
            client = BY_NAME.get(provider)
            lines.append(f"  {client.title if client else provider} ({provider})")
            last = provider
        found = f"{len(file.found)} entr{'y' if len(file.found) == 1 else 'ies'}"
        names = f": {', '.join(file.found)}" if file.found else ""
        lines.append(f"    {file.path}: {found}{names}")
        if file.problem:
            lines.append(f"      problem: {file.problem}")
        lines += [f"      skipped {name}: {reason}" for name, reason in file.skipped]
    return lines + [""]


def _where(config, opts) -> str:
    """The options `troupe approve` needs to find what this run found, from any directory."""
    import os

    from actors.settings.config import file_of
    parts = []
    config_file = file_of(config) if hasattr(config, "servers") else None
    if config_file:
        parts += ["--config", config_file]
    if opts.get("home"):
        parts += ["--home", os.path.abspath(os.path.expanduser(opts["home"]))]
    return "".join(f" {shlex.quote(p)}" for p in parts)


def render(services: list, report, settings, where: str = "") -> str:
    """Plain text: each service, its launch line, where it was found and how it merged. `where`:
    the options an approval hint adds (the config and home this run read)."""
    lines = [f"troupe discover: {len(services)} service(s) in {report.duration_s:.2f}s "
             f"(home {settings.home}, project {settings.project_root})", ""]
    for svc in services:
        launch = svc.get("url") or " ".join([svc.get("command", ""), *svc.get("args", [])])
        flags = [svc.get("provenance", "user"), "auto-connect" if svc["auto_connect"] else "manual"]
        if svc.get("trust") and svc["trust"] != trust.ALLOWED:
            # a project's server is found from its project only: the hint names it
            root = f" --project-root {shlex.quote(str(settings.project_root))}" \
                if svc.get("provenance") == "project" else ""
            if svc["trust"] == trust.PENDING:
                flags.append(f"{svc['trust']}: {trust.approve_hint(svc['name'])}{where}{root}")
            elif svc["trust"] == trust.NEEDS_INPUT:
                flags.append(f"needs-input: {', '.join(svc.get('needs_input') or ())}")
            else:
                flags.append(svc["trust"])
        if not svc["enabled"]:
            flags.append("disabled")
        if svc["registered"]:
            flags.append("registered")
        lines.append(f"{svc['name']}  [{svc['transport']}]  {_health_text(svc)}  "
                     f"confidence {svc['confidence']:.2f}  {', '.join(flags)}")
        lines.append(f"    {launch}")
        if svc.get("env_names"):
            lines.append(f"    env: {', '.join(svc['env_names'])}")
        if svc.get("header_names"):
            lines.append(f"    headers: {', '.join(svc['header_names'])}")
        merged = len(svc["sources"]) > 1
        for i, src in enumerate(svc["sources"]):
            how = "details from" if i == 0 and merged else "merged from" if merged else "from"
            lines.append(f"    {how} {src['provider']}: {src['file']} as {src['name']!r}")
        lines.append("")
    lines += render_clients(report)
    counts = ", ".join(f"{name} {n}" for name, n in report.per_source.items())
    lines.append(f"sources: {counts or 'none'}")
    if report.errors:
        lines.append("problems:")
        lines += [f"  {e}" for e in report.errors]
    return "\n".join(lines) + "\n"
