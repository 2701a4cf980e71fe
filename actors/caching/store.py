"""The in-memory store: an LRU bounded in bytes (the size of each encoded result), each entry with
its own TTL, counted (hits, misses, evictions, expirations, invalidations) in total and by server."""
from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

from actors.caching.keys import CacheKey

ENTRY_OVERHEAD = 64  # bytes counted per entry beyond its body: a key is not free either


@dataclass(frozen=True, slots=True)
class Cached:
    """One cached answer: the result as JSON bytes, when it was stored and when it stops being
    served (both on the store's clock)."""

    body: bytes
    stored_at: float
    expires_at: float

    @property
    def size(self) -> int:
        return len(self.body) + ENTRY_OVERHEAD


class Counts:
    """Figures of one store or one server's share of it (for /status and /metrics)."""

    __slots__ = ("hits", "misses", "stores", "evictions", "expired", "invalidated", "entries", "bytes")

    def __init__(self) -> None:
        self.hits = self.misses = self.stores = self.evictions = self.expired = self.invalidated = 0
        self.entries = self.bytes = 0

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in self.__slots__}


class ByteLru:
    """Cached answers by key, least recently used first; the sum of their sizes never exceeds
    `max_bytes` (the oldest go first; a result bigger than the whole bound is not kept). An entry
    past its TTL is a miss and is dropped when met. `clock` is injectable so tests need no sleeps.

    A plain object: the CacheKeeper actor owns it and alone calls it.
    """

    def __init__(self, max_bytes: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.clock = clock
        self._entries: OrderedDict[CacheKey, Cached] = OrderedDict()
        self._by_server: dict[str, set[CacheKey]] = {}
        self.total = Counts()
        self.servers: dict[str, Counts] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def _counts(self, server: str) -> Counts:
        counts = self.servers.get(server)
        if counts is None:
            counts = self.servers[server] = Counts()
        return counts

    def get(self, key: CacheKey) -> Cached | None:
        """The live entry for `key` (now the most recently used), or None; counted as hit or miss."""
        entry = self._entries.get(key)
        counts = self._counts(key.server)
        if entry is not None and entry.expires_at <= self.clock():
            self._drop(key)
            self.total.expired += 1
            counts.expired += 1
            entry = None
        if entry is None:
            self.total.misses += 1
            counts.misses += 1
            return None
        self._entries.move_to_end(key)
        self.total.hits += 1
        counts.hits += 1
        return entry

    def put(self, key: CacheKey, body: bytes, ttl: float) -> bool:
        """Keep `body` for `ttl` seconds, evicting the least recently used to make room; False when
        it alone is bigger than the bound (nothing is evicted for it)."""
        now = self.clock()
        entry = Cached(body, now, now + ttl)
        if entry.size > self.max_bytes:
            return False
        if key in self._entries:
            self._drop(key)
        self._entries[key] = entry
        self._by_server.setdefault(key.server, set()).add(key)
        self._account(key.server, entry.size, 1)
        self.total.stores += 1
        self._counts(key.server).stores += 1
        while self.total.bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)
            self.total.evictions += 1
            self._counts(oldest.server).evictions += 1
        return True

    def invalidate(self, server: str, uri: str | None = None) -> int:
        """Drop `server`'s entries (only its reads of `uri` when given); how many were dropped."""
        keys = [k for k in self._by_server.get(server, ()) if uri is None or k.uri == uri]
        for key in keys:
            self._drop(key)
        self.total.invalidated += len(keys)
        if keys:
            self._counts(server).invalidated += len(keys)
        return len(keys)

    def _drop(self, key: CacheKey) -> None:
        entry = self._entries.pop(key)
        same = self._by_server.get(key.server)
        if same is not None:
            same.discard(key)
            if not same:
                del self._by_server[key.server]
        self._account(key.server, -entry.size, -1)

    def _account(self, server: str, size: int, entries: int) -> None:
        counts = self._counts(server)
        for c in (self.total, counts):
            c.bytes += size
            c.entries += entries
