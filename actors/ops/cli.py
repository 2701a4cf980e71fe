"""`troupe audit [--config FILE] [--since 1h] [--client NAME] [--server NAME] [--json]`: the audit
trail the config names (its live and rotated files, oldest first), filtered, as a table or raw lines."""
from __future__ import annotations

import argparse
import re
import sys
import time
from datetime import datetime, timezone
from typing import Iterator

import orjson

from actors.ops import audit_file
from actors.ops.records import ACT, iso_time

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
COLUMNS = ("TIME", "CLIENT/BY", "SESSION", "METHOD/ACT", "SERVER", "TARGET", "OUTCOME", "MS")
TARGET_WIDTH = 48  # a long URI is cut in the table (--json has it whole)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="troupe audit", description="Show the audit trail the config's audit.file names.")
    p.add_argument("--config", help="troupe config (default: the embedded default)")
    p.add_argument("--since", help="only records this recent: 30s, 15m, 1h, 2d, or a time (2026-12-02T13:00:00Z)")
    p.add_argument("--client", help="only calls of this serve.clients name")
    p.add_argument("--server", help="only calls to, and acts on, this server (troupe: core tools)")
    p.add_argument("--json", action="store_true", help="print the matching lines as written (JSON lines)")
    return p


def since_cutoff(text: str, now: float | None = None) -> str:
    """The ISO time (as records spell it) a --since value means; ValueError if it means none."""
    match = _DURATION.match(text.strip())
    if match:
        seconds = float(match.group(1)) * UNITS[match.group(2)]
        return iso_time((time.time() if now is None else now) - seconds)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"--since {text!r}: use a duration (30s, 15m, 1h, 2d) or an ISO time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return iso_time(moment.timestamp())


def matching(lines: Iterator[bytes], since: str | None, client: str | None,
             server: str | None) -> Iterator[tuple[bytes, dict]]:
    """(line, its record) for each line that parses and passes the filters."""
    for line in lines:
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a line cut short by a full disk, say: the rest still reads
        if not isinstance(record, dict):
            continue
        if since is not None and str(record.get("time") or "") < since:
            continue  # ISO UTC times of one format compare as text
        if client is not None and (record.get("kind") == ACT or record.get("client") != client):
            continue
        if server is not None and record.get("server") != server:
            continue
        yield line, record


def row(record: dict) -> tuple[str, ...]:
    """One table row: a call's or an act's fields in the same columns."""
    if record.get("kind") == ACT:
        return (str(record.get("time") or ""), str(record.get("by") or "-"), "-",
                f"{record.get('act')} (via {record.get('via')})", str(record.get("server") or "-"), "-", "-", "-")
    target = str(record.get("target") or "-")
    if len(target) > TARGET_WIDTH:
        target = target[:TARGET_WIDTH - 1] + "…"
    outcome = str(record.get("outcome") or "")
    if record.get("code") is not None:
        outcome += f" {record['code']}"
    duration = record.get("duration_ms")
    return (str(record.get("time") or ""), str(record.get("client") or "-"), str(record.get("session") or "-"),
            f"{record.get('method')} ({record.get('era')})", str(record.get("server") or "-"), target, outcome,
            f"{duration:.1f}" if isinstance(duration, (int, float)) else "-")


def table(records: list[dict]) -> str:
    rows = [row(r) for r in records]
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(COLUMNS)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*COLUMNS), *(fmt.format(*r) for r in rows)]
    if not rows:
        out.append("(no matching records)")
    return "\n".join(line.rstrip() for line in out)


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    from actors.settings import config as config_mod
    try:
        config = config_mod.load(args.config)
    except config_mod.ConfigError as exc:
        print("troupe audit: config error:\n" + "\n".join(f"  {p}" for p in exc.problems), file=sys.stderr)
        return EXIT_USAGE
    if config.audit is None:
        print(f"troupe audit: {config.path} has no audit.file (add `audit: {{file: audit.jsonl}}`)", file=sys.stderr)
        return EXIT_USAGE
    try:
        since = since_cutoff(args.since) if args.since else None
    except ValueError as exc:
        print(f"troupe audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        found = list(matching(audit_file.read_lines(config.audit.file), since, args.client, args.server))
    except OSError as exc:
        print(f"troupe audit: cannot read {config.audit.file}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.json:
        sys.stdout.write("".join(line.decode() + "\n" for line, _ in found))
    else:
        print(table([record for _, record in found]))
    return EXIT_OK
