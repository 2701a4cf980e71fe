"""What a client has of each catalogue list, so that a list_changed notice tells it only news.

A notice is owed for a list kind only when the list as this client would now be shown it differs
from the one it has: a change its own listing already showed it (a first tools/list that waited
for start-up, then the start-up's change notice) is no news, nor is a change it was already
told of, and a client that never listed a kind has nothing to refresh. Lists are compared by
content digest (built with each snapshot), never by catalogue version: a rebuild
that leaves a client's view as it was (another client's profile, a withheld tool's bookkeeping)
changes the version but not the list.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable


if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue

KINDS = ("tools", "resources", "prompts")  # templates are part of "resources", as in list_changed
_ALIASES = {"templates": "resources", "resourceTemplates": "resources"}


def kinds_of(lists: Iterable[str]) -> list[str]:
    """The notice kinds among changed catalogue lists, in a fixed order (templates → resources)."""
    named = {_ALIASES.get(k, k) for k in lists}
    return [k for k in KINDS if k in named]


# The lists one notice kind stands for: resources/list_changed covers resources and templates,
# which a client lists apart (it may hold resources of one snapshot and templates of another).
PARTS = {"tools": ("tools",), "resources": ("resources", "resourceTemplates"), "prompts": ("prompts",)}


class ShownLists:
    """Per list (tools, resources, resourceTemplates, prompts): the digest of the one the client
    was last shown (`shown`), and of the one it was last told to fetch (`news` said so). Owned
    by one Session (for its legacy client) or by one listen stream, used only from that
    Session's greenlet."""

    __slots__ = ("_shown", "_told")

    def __init__(self) -> None:
        self._shown: dict[str, str] = {}
        self._told: dict[str, str] = {}

    def shown(self, part: str, cat: Catalogue) -> None:
        """The client has just been shown list `part` (tools, resources, resourceTemplates,
        prompts) of `cat`, its view of the catalogue."""
        self._shown[part] = cat.digests[part]
        self._told.pop(part, None)

    def holds(self, kind: str, cat: Catalogue) -> None:
        """The client is taken to hold every list of notice kind `kind` as `cat` has them (a
        listen stream opening, or a notice just sent)."""
        for part in PARTS[kind]:
            self.shown(part, cat)

    def news(self, kind: str, cat: Catalogue) -> bool:
        """Is notice kind `kind` news to the client: does any list of it that the client holds
        differ from `cat`'s, and was that not announced already? True is remembered as told.
        A list the client never fetched is no news: its first listing will be current."""
        parts = [p for p in PARTS[kind] if p in self._shown]
        stale = [p for p in parts if cat.digests[p] != self._shown[p] and cat.digests[p] != self._told.get(p)]
        if not stale:
            return False
        for p in parts:
            self._told[p] = cat.digests[p]
        return True
