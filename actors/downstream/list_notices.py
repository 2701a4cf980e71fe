"""What a client has of each catalogue list, so that a list_changed notice tells it only news.

A notice is owed for a list kind only when the list as this client would now be shown it differs
from the one it has: a change its own listing already showed it (a first tools/list that waited
for start-up, then the start-up's change notice) is no news, nor is a change it was already
told of, and a client that never listed a kind has nothing to refresh. Lists are compared by
content digest (views.digest: built with each snapshot), never by catalogue version: a rebuild
that leaves a client's view as it was (another client's profile, a withheld tool's bookkeeping)
changes the version but not the list.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from actors.catalogue import views

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue

KINDS = ("tools", "resources", "prompts")  # templates are part of "resources", as in list_changed
_ALIASES = {"templates": "resources", "resourceTemplates": "resources"}


def kinds_of(lists: Iterable[str]) -> list[str]:
    """The notice kinds among changed catalogue lists, in a fixed order (templates → resources)."""
    named = {_ALIASES.get(k, k) for k in lists}
    return [k for k in KINDS if k in named]


class ShownLists:
    """Per list kind: the digest of the list the client was last shown (`shown`), and of the one
    it was last told to fetch (`news` said so). Owned by one Session (for its legacy client) or
    by one listen stream, used only from that Session's greenlet."""

    __slots__ = ("_shown", "_told")

    def __init__(self) -> None:
        self._shown: dict[str, str] = {}
        self._told: dict[str, str] = {}

    def shown(self, kind: str, cat: Catalogue) -> None:
        """The client has just been shown list `kind` of `cat` (its view of the catalogue)."""
        self._shown[kind] = views.digest(cat, kind)
        self._told.pop(kind, None)

    def news(self, kind: str, cat: Catalogue) -> bool:
        """Is list `kind` of `cat` news to the client (it has a listing of that kind, this list
        differs from it and was not announced already)? True is remembered as told."""
        seen = self._shown.get(kind)
        if seen is None:
            return False  # never listed: its first listing will be current
        now = views.digest(cat, kind)
        if now == seen or now == self._told.get(kind):
            return False
        self._told[kind] = now
        return True
