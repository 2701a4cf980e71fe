"""The Redis backend (`cache.backend: redis`): cached answers in the cluster's Redis, shared by every
instance, each key with its TTL (SET PX), under the cluster's prefix. RedisEntries does the I/O
(from reader greenlets, never the keeper's own turn); RemoteIndex is the keeper's local account of
what this instance wrote, which enforces the byte bound: each instance keeps its own writes within
`max_bytes` (the Redis total is at most the sum over instances)."""
from __future__ import annotations

import hashlib
import time
from collections import OrderedDict

from actors.caching.keys import CacheKey
from actors.caching.store import ENTRY_OVERHEAD, Counts
from actors.cluster.link import LinkDown, RedisLink

SCAN_BATCH = 500  # keys per SCAN step when a server's entries are dropped


class RedisEntries:
    """Reads, writes and drops cached answers in Redis. Each method blocks the calling greenlet
    for one or a few commands (bounded by the link's timeouts); a Redis that is down is a miss,
    a write not made, an invalidation not made (the entries' TTLs still end them)."""

    def __init__(self, link: RedisLink) -> None:
        self.link = link

    def name(self, key: CacheKey) -> str:
        """Its Redis key: a server's entries share a prefix, and a resource's entries one more."""
        kind = f"r:{_short(key.uri)}" if key.uri is not None else "t"
        return self.link.key("cache", key.server, kind, key.digest())

    def get(self, key: CacheKey) -> tuple[bytes, float] | None:
        """The body and its age in seconds, or None."""
        try:
            raw = self.link.run(lambda r: r.get(self.name(key)))
        except LinkDown:
            return None
        if not raw:
            return None
        stamp, _, body = bytes(raw).partition(b" ")
        try:
            return body, max(0.0, time.time() - float(stamp))
        except ValueError:
            return None

    def put(self, key: CacheKey, body: bytes, ttl: float) -> None:
        value = b"%.6f " % time.time() + body  # the time it was stored: every instance shows one age
        try:
            self.link.run(lambda r: r.set(self.name(key), value, px=max(1, int(ttl * 1000))))
        except LinkDown:
            pass

    def delete(self, keys: list[CacheKey]) -> None:
        if keys:
            try:
                self.link.run(lambda r: r.unlink(*[self.name(k) for k in keys]))
            except LinkDown:
                pass

    def invalidate(self, server: str, uri: str | None) -> None:
        """Drop every instance's entries of `server` (its reads of `uri` only, when given)."""
        parts = ("cache", server, f"r:{_short(uri)}", "*") if uri is not None else ("cache", server, "*")
        pattern = self.link.key(*parts)
        try:
            names = list(self.link.run(lambda r: list(r.scan_iter(match=pattern, count=SCAN_BATCH))))
            for i in range(0, len(names), SCAN_BATCH):
                batch = names[i:i + SCAN_BATCH]
                self.link.run(lambda r, batch=batch: r.unlink(*batch))
        except LinkDown:
            pass


def _short(uri: str | None) -> str:
    return hashlib.sha256((uri or "").encode()).hexdigest()[:16]


class RemoteIndex:
    """The sizes of the entries this instance wrote to Redis, least recently used first, and the
    counts /status shows. Owned and used by the CacheKeeper alone."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._sizes: OrderedDict[CacheKey, int] = OrderedDict()
        self.total = Counts()
        self.servers: dict[str, Counts] = {}

    def counts(self, server: str) -> Counts:
        counts = self.servers.get(server)
        if counts is None:
            counts = self.servers[server] = Counts()
        return counts

    def read(self, key: CacheKey, hit: bool) -> None:
        for c in (self.total, self.counts(key.server)):
            if hit:
                c.hits += 1
            else:
                c.misses += 1
        if hit and key in self._sizes:
            self._sizes.move_to_end(key)

    def wrote(self, key: CacheKey, body: bytes) -> list[CacheKey] | None:
        """Account a write; the least recently used keys to delete to stay within the bound, or None
        when this body alone is bigger than the bound (not written)."""
        size = len(body) + ENTRY_OVERHEAD
        if size > self.max_bytes:
            return None
        self._forget(key)
        self._sizes[key] = size
        self._account(key.server, size, 1)
        for c in (self.total, self.counts(key.server)):
            c.stores += 1
        evicted = []
        while self.total.bytes > self.max_bytes:
            oldest = next(iter(self._sizes))
            self._forget(oldest)
            evicted.append(oldest)
            for c in (self.total, self.counts(oldest.server)):
                c.evictions += 1
        return evicted

    def invalidated(self, server: str, uri: str | None) -> None:
        keys = [k for k in self._sizes if k.server == server and (uri is None or k.uri == uri)]
        for key in keys:
            self._forget(key)
        for c in (self.total, self.counts(server)):
            c.invalidated += len(keys)

    def _forget(self, key: CacheKey) -> None:
        size = self._sizes.pop(key, None)
        if size is not None:
            self._account(key.server, -size, -1)

    def _account(self, server: str, size: int, entries: int) -> None:
        for c in (self.total, self.counts(server)):
            c.bytes += size
            c.entries += entries
