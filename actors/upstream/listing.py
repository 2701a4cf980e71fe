"""A server's lists (tools, resources, templates, prompts): read page by page after the
handshake, re-read on list_changed; each complete set is handed to the Connection to publish."""
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


class UpstreamLists:
    """Owns one Connection's lists and which of them are being read. Whenever none is being
    read any more, `on_complete` gets every list (a kind the server lacks is empty).

    A plain object used only from its Connection's greenlet; it knows nothing of the
    Connection but the `request` function it was given.
    """

    def __init__(self, request: Request, on_complete: Callable[[dict[str, tuple]], None], *, log=logger,
                 keep: Mapping[str, int] | None = None) -> None:
        self._request = request
        self._on_complete = on_complete
        self._log = log
        self._lists: dict[str, tuple] = {}
        self._reading: set[str] = set()
        self.ttls: dict[str, object] = {}  # kind → the ttlMs its last page carried (modern servers)
        # kind → how many items of it are kept (max_tools); the rest of the pages is read and
        # counted in `listed` only, so a server listing 50,000 tools costs memory for the kept ones.
        self._keep = dict(keep or {})
        self.listed: dict[str, int] = {}  # kind → how many items the last complete read listed

    def read(self, kinds: Iterable[str], capabilities: dict) -> None:
        """(Re-)read these kinds; one the server did not declare is empty without asking."""
        for kind in kinds:
            if mcp.LIST_CAPABILITY[kind] not in capabilities:
                self._lists[kind] = ()
                continue
            self._reading.add(kind)
            self._page(kind, None, [], 0, [0])
        self._maybe_complete()

    def _page(self, kind: str, cursor, acc: list, pages: int, seen: list) -> None:
        method, key = mcp.LIST_METHODS[kind]
        keep = self._keep.get(kind)

        def on_page(outcome) -> None:
            if isinstance(outcome, UpstreamError):
                # A failed re-read keeps the last good list: a passing error (a relay whose owner is
                # moving, a timeout under load) must not empty the catalogue of a working server.
                self._log.warning("{} failed: {}", method, outcome.message)
                self._lists.setdefault(kind, tuple(acc))
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
                self._lists[kind] = tuple(acc)
                self.listed[kind] = seen[0]
            self._reading.discard(kind)
            self._maybe_complete()

        self._request(method, {"cursor": cursor} if cursor else None, on_page)

    def _maybe_complete(self) -> None:
        if not self._reading:
            self._on_complete(dict(self._lists))
