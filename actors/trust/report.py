"""Rows of "what waits for approval", shared by the running troupe and the offline command."""
from __future__ import annotations

from typing import Mapping

from actors.supervision.states import ServerState
from actors.trust.ledger import KINDS


def server_row(name: str, provenance: str | None, file: str | None, launch: str | None) -> dict:
    """A server that may not run until approved (launch already redacted)."""
    return {"name": name, "what": "server", "provenance": provenance, "file": file, "launch": launch}


def withheld_rows(name: str, provenance: str | None, held: Mapping) -> list[dict]:
    """One row per withheld tool or prompt of one server, with its diff against the pin."""
    return [{"name": name, "what": kind[:-1], "item": item, "change": change.get("kind"),
             "diff": change.get("diff"), "provenance": provenance}
            for kind in KINDS for item, change in sorted((held.get(kind) or {}).items())]


def waiting(servers, snapshot) -> list[dict]:
    """Rows for `troupe approvals` and the dashboard, from a status report's servers and a trust snapshot."""
    rows = [server_row(s["name"], s.get("provenance"), s.get("origin_file"), s.get("shown_launch"))
            for s in servers if s.get("state") == ServerState.PENDING_APPROVAL]
    by_name = {s["name"]: s for s in servers}
    for held in snapshot.withheld.values():
        mine = by_name.get(held.get("name"))
        if mine is not None:  # another config's server shares the file: not ours to show
            rows += withheld_rows(mine["name"], mine.get("provenance"), held)
    return rows
