"""Messages of the TrustKeeper: decisions, first-sight pins, withheld definitions, snapshots."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import pykka


@dataclass(frozen=True, slots=True)
class Decide:
    """Asked of the TrustKeeper by Runtime.decide: an operator approves or denies one server
    identity. Reply: the file entry (a dict).

    Approving also accepts every definition withheld for that identity.
    """

    identity: str
    name: str
    decision: str  # approved | denied
    provenance: str | None
    launch: str | None  # redacted launch line or URL, for the file's reader
    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class PinFirstSight:
    """Told by the Registry: the first listing of a trusted or approved server, to pin."""

    identity: str
    name: str
    items: Mapping  # kind → name → (digest, definition)


@dataclass(frozen=True, slots=True)
class ReportWithheld:
    """Told by the Registry after each listing of a pinned server: what it withholds now."""

    identity: str
    name: str
    withheld: Mapping  # kind → name → {"digest", "kind", "diff", "definition"}


@dataclass(frozen=True, slots=True)
class TrustChanged:
    """Told to subscribers after the keeper publishes a new snapshot (read the box)."""

    version: int


@dataclass(frozen=True, slots=True)
class WatchTrust:
    """Told to the TrustKeeper by Runtime at start: tell `ref` a TrustChanged after every new snapshot."""

    ref: pykka.ActorRef
