"""Rows of "what waits for approval", shared by the running troupe and the offline command."""
from __future__ import annotations

from typing import Mapping

from actors.trust.ledger import KINDS


def server_row(name: str, provenance: str | None, file: str | None, launch: str | None) -> dict:
    """A server that may not run until approved (launch already redacted)."""
    return {"name": name, "what": "server", "provenance": provenance, "file": file, "launch": launch}


def withheld_rows(name: str, provenance: str | None, held: Mapping) -> list[dict]:
    """One row per withheld tool or prompt of one server, with its diff against the pin."""
    return [{"name": name, "what": kind[:-1], "item": item, "change": change.get("kind"),
             "diff": change.get("diff"), "provenance": provenance}
            for kind in KINDS for item, change in sorted((held.get(kind) or {}).items())]
