"""Screening a server's listing against its pinned definitions: what clients see, what waits."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Mapping

from actors.slicing import never, paced
from actors.trust import digest as dg
from actors.trust.ledger import KINDS, Pinned


@dataclass(frozen=True, slots=True)
class Screened:
    """One listing after screening."""

    shown: Mapping[str, tuple]  # kind → the items clients may see
    withheld: Mapping[str, Mapping[str, Mapping]]  # kind → name → {"digest", "kind", "diff", "definition"}
    first_sight: Mapping[str, Mapping[str, tuple]] | None = None  # kind → name → (digest, definition) to pin

    @property
    def withheld_count(self) -> int:
        return sum(len(v) for v in self.withheld.values())


def _name(item) -> str | None:
    name = item.get("name")
    return name if isinstance(name, str) and name else None


def digests(lists: Mapping[str, tuple], between: Callable[[], None] = never) -> dict[str, tuple]:
    """kind → the digest of each listed item, in order: computed once per listing, so screening
    it again after an approval costs dictionary lookups only. `between()` runs after each item
    (the Registry's slicing.Slices)."""
    return {k: tuple(paced((dg.digest(k, item) for item in lists.get(k, ())), between)) for k in KINDS}


def screen(lists: Mapping[str, tuple], pinned: Pinned | None, pin: bool,
           sums: Mapping[str, tuple] | None = None, between: Callable[[], None] = never) -> Screened:
    """lists: kind → definitions as listed (sums: their digests, see `digests`). With no pin
    yet, everything is shown and pinned now (trust on first sight of an approved or
    configured server); afterwards a definition whose digest differs from its pin, or one
    never pinned, is withheld. `between()` runs after each item."""
    if not pin:
        return Screened(MappingProxyType({k: tuple(lists.get(k, ())) for k in KINDS}), MappingProxyType({}))
    sums = sums if sums is not None else digests(lists, between)
    if pinned is None:
        first = {k: {n: (d, dg.essence(k, item)) for item, d in paced(zip(lists.get(k, ()), sums[k]), between)
                     if (n := _name(item))} for k in KINDS}
        return Screened(MappingProxyType({k: tuple(lists.get(k, ())) for k in KINDS}), MappingProxyType({}),
                        MappingProxyType(first))
    shown, withheld = {}, {}
    for kind in KINDS:
        pins = pinned.of(kind)
        keep, held = [], {}
        for item, d in paced(zip(lists.get(kind, ()), sums[kind]), between):
            name = _name(item)
            if name is None:
                keep.append(item)  # the catalogue drops nameless items itself
                continue
            before = pins.get(name)
            if before is not None and before[0] == d:
                keep.append(item)
                continue
            held[name] = MappingProxyType({"digest": d, "kind": "changed" if before else "new",
                                           "diff": dg.diff(kind, before[1] if before else None, item),
                                           "definition": dg.essence(kind, item)})
        shown[kind], withheld[kind] = tuple(keep), MappingProxyType(held)
    return Screened(MappingProxyType(shown), MappingProxyType(withheld))
