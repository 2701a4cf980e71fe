"""What each running troupe tells `troupe approve` about its servers: one file per process beside
the approvals file (`running/<pid>.json`), written by that process's TrustKeeper alone.

A decision is keyed by the server's identity as the running troupe computes it (its launch line,
resolved on *its* PATH) and the server may come from any config file: the command reads these
records to find a server by name, whatever config it came from and whatever PATH the shell that
runs it has, and to see the running troupe apply the decision before it reports success.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Mapping

import orjson

from actors.private_files import write_private

FOLDER = "running"
PENDING, DENIED, NEEDS_INPUT, ALLOWED = "pending-approval", "denied", "needs-input", "allowed"
GATED = (PENDING, DENIED, NEEDS_INPUT)  # the trust gate holds these; any other state is ALLOWED


def folder(approvals_path: str) -> Path:
    return Path(approvals_path).with_name(FOLDER)


def record_path(approvals_path: str, runtime: str) -> Path:
    """One runtime's record: `runtime` is unique in its process (an embedding app may run two)."""
    return folder(approvals_path) / f"{os.getpid()}-{runtime}.json"


def write(path: Path, approvals_path: str, config_file: str | None, servers: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace one runtime's record: `servers` maps each server's name to its identity, its
    trust state (PENDING, DENIED, NEEDS_INPUT or ALLOWED), provenance, shown launch line and origin file."""
    blob = orjson.dumps({"pid": os.getpid(), "started": _start_time(os.getpid()), "config": config_file,
                         "approvals_file": approvals_path, "written_at": time.time(), "servers": servers},
                        option=orjson.OPT_SORT_KEYS)
    # Not durable: a record is rewritten as the servers change and a crash leaves a stale one anyway
    # (live() skips it, prune() removes it), so it needs no fsync, nor a worker thread to wait for one.
    write_private(path, blob, ".running-", durable=False)


def remove(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def live(approvals_path: str) -> list[dict]:
    """The records of troupes running now (a record whose process is gone is skipped)."""
    return [record for _, record in _records(approvals_path) if record is not None]


def prune(approvals_path: str) -> None:
    """Remove the records of processes that are gone (killed before they could remove their own)."""
    for path, record in _records(approvals_path):
        if record is None:
            try:
                path.unlink()
            except OSError:
                pass  # another troupe pruned it first


def _records(approvals_path: str) -> list[tuple[Path, dict | None]]:
    """(file, its record, or None when its process is gone) for each record file; files being
    replaced or unreadable are left out."""
    out: list[tuple[Path, dict | None]] = []
    try:
        entries = sorted(folder(approvals_path).glob("*.json"))
    except OSError:
        return out
    for path in entries:
        try:
            record = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # half gone (a troupe stopping) or not ours
        if not isinstance(record, dict) or not isinstance(record.get("servers"), dict):
            continue
        pid = record.get("pid")
        # the same process, not another that took its pid since (its start time says which)
        alive = isinstance(pid, int) and not isinstance(pid, bool) and _alive(pid) and \
            record.get("started") == _start_time(pid)
        out.append((path, record if alive else None))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process took the pid: ours (this user's troupe) is gone
    return True


def _start_time(pid: int) -> int | None:
    """When process `pid` started, in clock ticks since boot (Linux /proc; None elsewhere, where
    only the pid is compared): a pid reused by another process has another start time."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return int(fields[19])  # field 22 of stat(5); [0] here is field 3, after "pid (comm)"
    except (OSError, IndexError, ValueError):
        return None
