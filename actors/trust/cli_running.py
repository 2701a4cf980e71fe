"""`troupe approve|deny NAME` for a server a running troupe has: found in the running records
(actors/trust/running.py) whatever config it came from, decided under the identity that troupe
computed (its launch line on its own PATH), and reported only once that troupe applied it."""
from __future__ import annotations

import os
import time

from actors.settings.config import DEFAULT_CONFIG
from actors.trust import ledger, running
from actors.trust import provenance as trust

CONFIRM_TIMEOUT = 10.0  # a running troupe reloads the approvals file within about a second
CONFIRM_POLL = 0.1


class NotApplied(Exception):
    """The decision is in the file, but a running troupe did not apply it in time; the message says which."""


def _config_of(record: dict) -> str:
    return record.get("config") or os.path.abspath(DEFAULT_CONFIG)


def matches(records: list[dict], name: str, config: str | None, pid: int | None = None) -> list[tuple[dict, dict]]:
    """(record, its entry for `name`) of every running troupe that has a server so named; with
    `config`, only the troupes running from that file; with `pid`, only that troupe."""
    wanted = os.path.abspath(config) if config else None
    out = []
    for record in records:
        entry = record["servers"].get(name)
        if isinstance(entry, dict) and isinstance(entry.get("identity"), str) and (
                wanted is None or _config_of(record) == wanted) and (pid is None or record.get("pid") == pid):
            out.append((record, entry))
    return out


def approve_command(command: str, name: str, config: str | None) -> str:
    return trust.approve_hint(name, config, command)


def decide(command: str, name: str, found: list[tuple[dict, dict]], book, path: str,
           timeout: float | None = None, shown: str | None = None) -> dict:
    """Record the decision in `book` under each identity the running troupes use for `name`, then
    wait until each troupe shows it applied (their records beside `path`). LookupError when troupes
    running from different configs each have a server so named (the message gives the command for
    each); NotApplied on a timeout. `shown`: where the decision is recorded, as the output says."""
    configs = sorted({_config_of(record) for record, _ in found})
    if len(configs) > 1:
        raise LookupError(f"troupes running from {len(configs)} configs each have a server named {name!r}; "
                          "name the one you mean: " + "; ".join(f"`{approve_command(command, name, c)}`"
                                                                   for c in configs))
    if len({e["identity"] for _, e in found}) > 1:  # one name, several launch lines (projects of one config)
        raise LookupError(f"running troupes have different servers named {name!r}; name the one you mean: "
                          + "; ".join(f"`{approve_command(command, name, None)} --pid {r['pid']}` for "
                                      f"{e.get('launch') or '?'}" for r, e in sorted(found, key=lambda f: f[0]["pid"])))
    decision = ledger.APPROVED if command == "approve" else ledger.DENIED
    entry: dict = {}
    for identity, first in {e["identity"]: e for _, e in found}.items():
        entry, _ = book.update(lambda data, identity=identity, first=first: dict(ledger.decide(
            data, identity, name, decision, first.get("provenance"), first.get("launch"))))
    _, first = found[0]
    target = running.ALLOWED if decision == ledger.APPROVED else running.DENIED
    note = None
    if decision == ledger.APPROVED and all(e.get("state") == running.NEEDS_INPUT for _, e in found):
        note = "it still needs an input value before troupe can start it"  # no approval fills `${input:…}`
    elif all(e.get("state") == target for _, e in found):  # its record cannot show the change (withheld tools)
        note = f"the running troupe (pid {', '.join(str(r['pid']) for r, _ in found)}) reads it within a second"
    if note is not None:
        return {"server": name, "decision": decision, "provenance": first.get("provenance"),
                "launch": first.get("launch"), "file": first.get("file"), "pinned": bool(entry.get("pinned")),
                "approvals_file": shown or path, "config": configs[0], "applied_by": [], "note": note}
    pids = _wait_applied(path, name, {(r["pid"], e["identity"]) for r, e in found}, target,
                         CONFIRM_TIMEOUT if timeout is None else timeout, shown or path)
    return {"server": name, "decision": decision, "provenance": first.get("provenance"),
            "launch": first.get("launch"), "file": first.get("file"), "pinned": bool(entry.get("pinned")),
            "approvals_file": shown or path, "config": configs[0], "applied_by": pids}


def _wait_applied(path: str, name: str, waiting: set, target: str, timeout: float, shown: str) -> list[int]:
    """Poll the running records until each troupe in `waiting` ((pid, identity)) shows `name` in the
    `target` state (a troupe that stopped meanwhile has nothing left to apply); the pids that did."""
    deadline = time.monotonic() + timeout
    while True:
        states = {}
        for record in running.live(path):
            entry = record["servers"].get(name)
            if isinstance(entry, dict):
                states[(record["pid"], entry.get("identity"))] = entry.get("state")
        left = {key for key in waiting if key in states and states[key] != target}
        if not left:
            return sorted({pid for pid, identity in waiting if states.get((pid, identity)) == target})
        if time.monotonic() > deadline:
            where = ", ".join(f"pid {pid}: {states[(pid, i)]}" for pid, i in sorted(left))
            raise NotApplied(f"recorded in {shown}, but the running troupe still shows {name} as not "
                             f"{target} after {timeout:g}s ({where})")
        time.sleep(CONFIRM_POLL)


def rows(records: list[dict], snapshot) -> list[dict]:
    """What waits in running troupes: their pending servers and withheld definitions, with the
    config each came from (shown when two configs have servers of one name)."""
    from actors.trust.report import server_row, withheld_rows
    out, seen = [], set()
    for record in records:
        for name, entry in sorted(record["servers"].items()):
            if not isinstance(entry, dict) or (name, entry.get("identity")) in seen:
                continue
            seen.add((name, entry.get("identity")))
            here = []
            if entry.get("state") == running.PENDING:
                here.append(server_row(name, entry.get("provenance"), entry.get("file"), entry.get("launch")))
            held = snapshot.withheld.get(entry.get("identity"))
            if held is not None:
                here += withheld_rows(name, entry.get("provenance"), held)
            for row in here:
                row["config"] = record.get("config")
            out += here
    return out
