"""CacheKeeper actor: the one owner of the response cache (the in-memory store, or the local
account of what this instance wrote to Redis) and of each server's invalidation epoch."""
from __future__ import annotations

import gevent
import pykka
from loguru import logger

from actors.caching.messages import GetCacheStats, Invalidate, LookedUp, LookUp, RemoteRead, Store
from actors.caching.redis_store import RedisEntries, RemoteIndex
from actors.caching.store import ByteLru
from actors.events.bus import BusClient
from actors.tells import tell

# Events after which a server's cached answers may be stale: its lists changed, it restarted
# (a new connection generation is ready, or the old one died), or one of its resources changed.
INVALIDATING_EVENTS = ("ServerListChanged", "ServerConnected", "ServerDisconnected", "ResourceUpdated")
BUS_TOKEN = "cache-keeper"


class CacheKeeper(pykka.ThreadingActor):
    """Owns the cache. Receives LookUp (answers through its reply: LookedUp), Store, Invalidate
    (from its own bus listener, for ServerListChanged, ServerConnected, ServerDisconnected and
    ResourceUpdated), RemoteRead (from its Redis readers) and GetCacheStats (reply: a dict).

    With the memory backend every lookup is answered in the keeper's own turn. With Redis, a
    lookup, a write and an invalidation each run in a greenlet of their own (Redis I/O never
    holds the mailbox); the readers answer the Session directly and tell the keeper how it went.
    """

    def __init__(self, max_bytes: int, bus: BusClient | None = None, remote: RedisEntries | None = None,
                 clock=None) -> None:
        super().__init__()
        self.bus, self.remote = bus, remote
        self.max_bytes = max_bytes
        self.store = ByteLru(max_bytes, clock) if clock is not None else ByteLru(max_bytes)
        self.index = RemoteIndex(max_bytes) if remote is not None else None
        self._epochs: dict[str, int] = {}

    def on_start(self) -> None:
        if self.bus is not None:
            me = self.actor_ref

            def heard(event) -> None:  # runs in the bus greenlet: only a tell
                tell(me, Invalidate(event.server, event.kind, getattr(event, "uri", None)
                                    if event.kind == "ResourceUpdated" else None))
            self.bus.subscribe(BUS_TOKEN, heard, INVALIDATING_EVENTS)

    def on_stop(self) -> None:
        if self.bus is not None:
            self.bus.unsubscribe(BUS_TOKEN)

    def on_receive(self, message):
        match message:
            case LookUp(key=key, reply=reply):
                self._look_up(key, reply)
            case Store():
                self._store(message)
            case Invalidate(server=server, uri=uri, why=why):
                self._invalidate(server, uri, why)
            case RemoteRead(key=key, hit=hit):
                assert self.index is not None  # only Redis readers send it
                self.index.read(key, hit)
            case GetCacheStats(reply=reply):
                reply.set(self.stats())
            case _:
                logger.warning("cache: unknown message {!r}", message)

    def _look_up(self, key, reply) -> None:
        epoch = self._epochs.get(key.server, 0)
        if self.remote is None:
            entry = self.store.get(key)
            found = LookedUp(entry.body, self.store.clock() - entry.stored_at, epoch) if entry is not None \
                else LookedUp(None, 0.0, epoch)
            _answer(reply, found)
            return
        remote, me = self.remote, self.actor_ref

        def read() -> None:
            got = remote.get(key)
            _answer(reply, LookedUp(got[0], got[1], epoch) if got is not None else LookedUp(None, 0.0, epoch))
            tell(me, RemoteRead(key, got is not None))
        gevent.spawn(read)

    def _store(self, msg: Store) -> None:
        if msg.epoch != self._epochs.get(msg.key.server, 0):
            return  # the server changed while this call was under way: its answer may be stale
        if self.remote is None:
            self.store.put(msg.key, msg.body, msg.ttl)
            return
        assert self.index is not None  # made with the remote
        evicted = self.index.wrote(msg.key, msg.body)
        if evicted is None:
            return
        remote = self.remote

        def write() -> None:
            remote.put(msg.key, msg.body, msg.ttl)
            remote.delete(evicted)
        gevent.spawn(write)

    def _invalidate(self, server: str, uri: str | None, why: str) -> None:
        self._epochs[server] = self._epochs.get(server, 0) + 1
        if self.remote is None:
            dropped = self.store.invalidate(server, uri)
            if dropped:
                logger.debug("cache: {} dropped {} entries of {}", why, dropped, server)
            return
        assert self.index is not None
        self.index.invalidated(server, uri)
        gevent.spawn(self.remote.invalidate, server, uri)

    def stats(self) -> dict:
        """The cache section of /status: backend, bound, counts in total and by server."""
        counts = self.index if self.index is not None else self.store
        return {"backend": "redis" if self.remote is not None else "memory", "max_bytes": self.max_bytes,
                **counts.total.to_json(),
                "servers": {name: c.to_json() for name, c in sorted(counts.servers.items())}}


def _answer(reply, found: LookedUp) -> None:
    try:
        reply(found)
    except Exception:  # a reply is a tell to a Session; a bug in one must not stop the cache
        logger.exception("cache: a lookup's reply failed")
