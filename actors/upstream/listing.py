"""A server's lists (tools, resources, templates, prompts): read page by page after the
handshake, re-read on list_changed or a modern ttl (coalesced: per kind one read in flight and
at most one pending), each finished read handed to the Connection with whether it changed."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from loguru import logger

from actors.messages import UpstreamError
from actors.protocol import mcp

MAX_LIST_PAGES = 1000  # a server that pages forever is cut off
# A list that could not be read is read again this soon on a modern upstream (one that never
# announces changes is otherwise re-read only by the ttl its last good page carried).
FAILED_LIST_RETRY_MS = 5_000

# How the lists send a request: (method, params, on_reply), answered once with a result or UpstreamError.
Request = Callable[[str, Any, Callable[[Any], None]], None]
# What the lists hand on: (every list, the kinds whose read just ended, whether any list changed).
OnRead = Callable[[dict[str, tuple], tuple, bool], None]


class UpstreamLists:
    """Owns one Connection's lists, which kinds are being read and which must be read again.

    Per kind at most one read is in flight (its pages one after another) and one is pending:
    a re-read asked while one is in flight marks it pending (any number of asks make one), and
    it is sent when the read in flight ends. A storm of list_changed so costs about one re-read
    per round trip, and the last notification is always followed by a read that starts after it
    (no update is lost).

    `on_stale(kinds)` hears of a server's list_changed once per coalesced re-read at most: when
    one starts a read or makes one pending, and, for one that came while the read was already
    pending, when that read is sent. So whatever follows a notification (the cache dropping
    the server's answers) still happens at or after each one, without an event per notification.

    The first time every kind has been read, `on_read` gets every list (a kind the server lacks
    is empty); afterwards it gets them each time a kind's read ends, with `changed` False when
    the new list equals the last one (so an unchanged re-list rebuilds nothing downstream).

    A plain object used only from its Connection's greenlet; it knows nothing of the
    Connection but the `request` function it was given (and the stats it counts re-reads in).
    """

    def __init__(self, request: Request, on_read: OnRead, *, on_stale: Callable[[tuple], None] = lambda kinds: None,
                 stats=None, log=logger, keep: Mapping[str, int] | None = None) -> None:
        self._request = request
        self._on_read = on_read
        self._on_stale = on_stale
        self._stats = stats  # ServerStats: `relists` counts the re-reads sent (a paginated one once)
        self._log = log
        self._lists: dict[str, tuple] = {}
        self._reading: set[str] = set()  # a read of these kinds is in flight
        self._pending: set[str] = set()  # these are read again once their read in flight ends
        self._unheard: set[str] = set()  # pending kinds the server announced again: on_stale when read
        self._done: list[str] = []  # kinds whose read ended since the last hand-on
        self._changed = False  # a list differs from the one last handed on
        self._listed = False  # every kind has been read once and handed on
        self._capabilities: dict | None = None  # the server's, from the first read() (None: not opened)
        self.ttls: dict[str, object] = {}  # kind → the ttlMs its last page carried (modern servers)
        # kind → how many items of it are kept (max_tools); the rest of the pages is read and
        # counted in `listed` only, so a server listing 50,000 tools costs memory for the kept ones.
        self._keep = dict(keep or {})
        self.listed: dict[str, int] = {}  # kind → how many items the last complete read listed

    @property
    def pending(self) -> frozenset:
        """The kinds to be read again once their read in flight ends."""
        return frozenset(self._pending)

    @property
    def reading(self) -> frozenset:
        """The kinds with a read in flight."""
        return frozenset(self._reading)

    def read(self, kinds: Iterable[str], capabilities: dict) -> None:
        """(Re-)read these kinds; one the server did not declare is empty without asking."""
        self._capabilities = capabilities
        for kind in kinds:
            if mcp.LIST_CAPABILITY[kind] not in capabilities:
                self._store(kind, ())
                self._done.append(kind)
            elif kind in self._reading:
                self._pending.add(kind)  # one pending however many ask
            else:
                self._start(kind)
        self._maybe_hand_on()

    def changed(self, kinds: Iterable[str]) -> None:
        """The server said these lists changed: re-read them (nothing before the first read)."""
        if self._capabilities is None:
            return
        kinds = tuple(kinds)
        if self._pending.issuperset(kinds):  # a storm's common case: the re-read is due already
            self._unheard.update(kinds)
            return
        fresh = tuple(k for k in kinds if k not in self._pending)
        self._unheard.update(k for k in kinds if k in self._pending)
        self.read(kinds, self._capabilities)
        if fresh:
            self._on_stale(fresh)

    def due(self, kinds: Iterable[str]) -> None:
        """A timer says these lists may be stale (a modern ttl): re-read them, announcing nothing."""
        if self._capabilities is not None:
            self.read(kinds, self._capabilities)

    def _start(self, kind: str) -> None:
        if kind in self._lists and self._stats is not None:
            self._stats.relists += 1  # read before: this one is a re-read
        self._reading.add(kind)
        self._page(kind, None, [], 0, [0])

    def _store(self, kind: str, items: tuple) -> None:
        if kind not in self._lists or self._lists[kind] != items:  # a tuple of dicts: equal content, equal
            self._changed = True
        self._lists[kind] = items

    def _page(self, kind: str, cursor, acc: list, pages: int, seen: list) -> None:
        method, key = mcp.LIST_METHODS[kind]
        keep = self._keep.get(kind)

        def on_page(outcome) -> None:
            if isinstance(outcome, UpstreamError):
                # A failed re-read keeps the last good list: a passing error (a relay whose owner is
                # moving, a timeout under load) must not empty the catalogue of a working server.
                # One lost with its connection (troupe stopping, say) is that connection's news, told once.
                (self._log.debug if outcome.link_lost else self._log.warning)("{} failed: {}", method,
                                                                               outcome.message)
                if kind not in self._lists:
                    self._store(kind, tuple(acc))
                self.ttls[kind] = FAILED_LIST_RETRY_MS
            else:
                items = [i for i in (outcome.get(key) if isinstance(outcome.get(key), list) else ())
                         if isinstance(i, dict)]
                seen[0] += len(items)
                # One over the limit is kept, so that whoever applies it knows it was passed.
                acc.extend(items if keep is None else items[:max(0, keep + 1 - len(acc))])
                self.ttls[kind] = outcome.get("ttlMs")
                nxt = outcome.get("nextCursor")
                if nxt and nxt != cursor and pages + 1 < MAX_LIST_PAGES:
                    self._page(kind, nxt, acc, pages + 1, seen)
                    return
                self.listed[kind] = seen[0]
                self._store(kind, tuple(acc))
            self._ended(kind)

        self._request(method, {"cursor": cursor} if cursor else None, on_page)

    def _ended(self, kind: str) -> None:
        self._reading.discard(kind)
        self._done.append(kind)
        self._maybe_hand_on()
        if kind in self._pending:  # asked again while it was read: read it now, once
            self._pending.discard(kind)
            self._start(kind)
            if kind in self._unheard:
                self._unheard.discard(kind)
                self._on_stale((kind,))

    def _maybe_hand_on(self) -> None:
        # The first listing waits for every kind (the server is ready with all of them);
        # later each ended read is handed on at once, the other kinds as last read.
        if not self._done or (not self._listed and self._reading):
            return
        self._listed = True
        done, self._done = tuple(dict.fromkeys(self._done)), []
        changed, self._changed = self._changed, False
        self._on_read(dict(self._lists), done, changed)
