"""Messages of the TrustKeeper: decisions, first-sight pins, withheld definitions, snapshots."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import orjson
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
    """Told by the Registry: the first listing of a trusted or approved server, to pin.

    The pins travel pre-encoded (`of` encodes, `items` decodes a fresh copy): the definitions are
    the upstream's own dicts, which the Registry keeps, and the keeper writes what it gets into
    its file data, so a shared dict would be one object two actors hold. Rare (first sight only)."""

    identity: str
    name: str
    items_json: bytes  # kind → name → [digest, definition]
    # True: tools the server added during its first start (see registry.FIRST_SIGHT_WINDOW),
    # pinned beside what is pinned already; an existing pin is never changed either way.
    extend: bool = False

    @classmethod
    def of(cls, identity: str, name: str, items: Mapping, extend: bool = False) -> PinFirstSight:
        return cls(identity, name, orjson.dumps(items, default=dict), extend)

    @property
    def items(self) -> dict[str, Any]:
        return orjson.loads(self.items_json)


@dataclass(frozen=True, slots=True)
class KeepListing:
    """Told by the Registry after a listing of an on-demand server that differs from the one kept:
    its full definitions (pre-encoded: `listing_json` is {"tools", "resources", "templates",
    "prompts", "capabilities", "instructions"}), written beside its pins and served while it is stopped."""

    identity: str
    name: str
    listing_json: bytes

    @property
    def listing(self) -> dict[str, Any]:
        return orjson.loads(self.listing_json)


@dataclass(frozen=True, slots=True)
class ReportWithheld:
    """Told by the Registry after each listing of a pinned server: what it withholds now.
    Pre-encoded, as PinFirstSight's pins (`of` encodes, `withheld` decodes a fresh copy)."""

    identity: str
    name: str
    withheld_json: bytes  # kind → name → {"digest", "kind", "diff", "definition"}

    @classmethod
    def of(cls, identity: str, name: str, withheld: Mapping) -> ReportWithheld:
        return cls(identity, name, orjson.dumps(withheld, default=dict))

    @property
    def withheld(self) -> dict[str, Any]:
        return orjson.loads(self.withheld_json)


@dataclass(frozen=True, slots=True)
class TrustChanged:
    """Told to subscribers after the keeper publishes a new snapshot (read the box)."""

    version: int


@dataclass(frozen=True, slots=True)
class WatchTrust:
    """Told to the TrustKeeper by Runtime at start: tell `ref` a TrustChanged after every new snapshot."""

    ref: pykka.ActorRef


@dataclass(frozen=True, slots=True)
class ServersSeen:
    """Told to the TrustKeeper by the Supervisor (through Runtime's wiring) after each new
    Directory: every server this troupe has, for its running record (actors/trust/running.py),
    from which `troupe approve NAME` learns the identity and the state the running troupe sees."""

    directory: Any  # a supervision.directory.Directory (immutable)
