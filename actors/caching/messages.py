"""The messages of the response cache: what a Session tells the CacheKeeper (LookUp, Store), what
it hears back (CacheAnswered, through the LookUp's reply), and what the keeper tells itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pykka

from actors.caching.keys import CacheKey


@dataclass(frozen=True, slots=True)
class LookedUp:
    """The keeper's answer to a LookUp: the cached result as JSON bytes and its age, or body None
    for a miss; `epoch` is the server's invalidation count when it looked (a Store made from a
    call that began before a later invalidation is dropped)."""

    body: bytes | None
    age_s: float = 0.0
    epoch: int = 0


@dataclass(frozen=True, slots=True)
class LookUp:
    """Told by a Session to the CacheKeeper: is `key` cached? The keeper calls `reply(LookedUp)`
    exactly once (in its own greenlet, or a reader greenlet for Redis): a tell back to the Session."""

    key: CacheKey
    reply: Callable[[LookedUp], None]


@dataclass(frozen=True, slots=True)
class Store:
    """Told by a Session to the CacheKeeper after a cacheable call succeeded: keep `body` (the
    result as JSON) under `key` for `ttl` seconds, unless the server was invalidated since `epoch`."""

    key: CacheKey
    body: bytes
    ttl: float
    epoch: int


@dataclass(frozen=True, slots=True)
class Invalidate:
    """Told to the CacheKeeper by its bus listener: drop `server`'s entries (only its reads of
    `uri` when set) because of `why` (an event's kind)."""

    server: str
    why: str
    uri: str | None = None


@dataclass(frozen=True, slots=True)
class GetCacheStats:
    """Asked of the CacheKeeper by edge code (status, metrics); reply: a dict with the backend,
    the bound and the counts, in total and by server."""

    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class RemoteRead:
    """Told by a Redis reader greenlet to its CacheKeeper: how a lookup went (counted here, the
    key made most recently used in the local index)."""

    key: CacheKey
    hit: bool


@dataclass(frozen=True, slots=True)
class CacheAnswered:
    """Told to a Session (by the keeper's reply, or its own lookup deadline with `found` None):
    the outcome of its lookup number `lookup`."""

    lookup: int
    found: LookedUp | None
