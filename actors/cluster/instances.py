"""InstanceRegistry: this instance's heartbeat in Redis, and the list of every live instance.

Each instance keeps one key, `<prefix>:instance:<name>`, holding its URL, start time, last
heartbeat and the servers it owns, with a TTL of one lease: an instance that stops beating is
gone from the list within a lease, and its leases expire with it. A stopping instance deletes
its key at once, so the others need not wait for the TTL.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import gevent
import orjson
import pykka
from loguru import logger

from actors.cluster.link import LinkDown, RedisLink
from actors.cluster.settings import ClusterConfig
from actors.tells import tell

BEATS_PER_LEASE = 3  # a heartbeat every lease/3: two may be lost before the key expires
MAX_BACKOFF_S = 30.0  # while Redis is down, the heartbeat probes it at most this far apart


@dataclass(frozen=True, slots=True)
class GetInstances:
    """Asked of the InstanceRegistry: reply with every live instance (a list of dicts, by name),
    or an exception if Redis cannot be read."""

    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class SetOwned:
    """Told to the InstanceRegistry by the lease keeper: the servers this instance owns now."""

    servers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Beat:
    """Told by the heartbeat greenlet to its registry: write the heartbeat now."""


class InstanceRegistry(pykka.ThreadingActor):
    """Owns this instance's entry in Redis (written on each heartbeat from its own greenlet's
    tells) and answers GetInstances; its Redis reads run in greenlets so a slow Redis never
    holds the mailbox. Receives GetInstances, SetOwned and _Beat; sends nothing to other actors."""

    def __init__(self, link: RedisLink, cluster: ClusterConfig) -> None:
        super().__init__()
        assert cluster.instance is not None and cluster.advertise is not None  # named() before start
        self.link, self.cluster = link, cluster
        self.started = time.time()
        self.owned: tuple[str, ...] = ()
        self._beats: gevent.Greenlet | None = None
        self._writing = False

    @property
    def interval(self) -> float:
        return self.cluster.lease / BEATS_PER_LEASE

    def on_start(self) -> None:
        self._beats = gevent.spawn(self._beat_loop, self.actor_ref)

    def on_stop(self) -> None:
        if self._beats is not None:
            self._beats.kill(block=False)
        key = self._key(self.cluster.instance or "")
        try:
            self.link.run(lambda r: r.delete(key))  # leave at once: the others need not wait for the TTL
        except LinkDown:
            pass

    def on_receive(self, message):
        match message:
            case _Beat():
                self._beat()
            case SetOwned(servers=servers):
                self.owned = tuple(sorted(servers))
                self._beat()
            case GetInstances(reply=reply):
                gevent.spawn(self._answer_instances, reply)
            case _:
                logger.warning("cluster: instance registry got unknown message {!r}", message)

    def _key(self, name: str) -> str:
        return self.link.key("instance", name)

    def entry(self) -> dict:
        return {"instance": self.cluster.instance, "url": self.cluster.advertise, "started": self.started,
                "heartbeat": time.time(), "servers": list(self.owned)}

    def _beat(self) -> None:
        key, body, ttl_ms = self._key(self.cluster.instance or ""), orjson.dumps(self.entry()), \
            int(self.cluster.lease * 1000)
        try:
            self.link.run(lambda r: r.set(key, body, px=ttl_ms))
        except LinkDown:
            pass  # the link says why; the heartbeat loop backs off

    def _beat_loop(self, me: pykka.ActorRef) -> None:
        delay = self.interval
        while True:
            try:
                me.tell(_Beat())
            except pykka.ActorDeadError:
                return
            gevent.sleep(delay)
            # while Redis is down, probe less and less often (it may be restarting)
            delay = self.interval if self.link.up else min(MAX_BACKOFF_S, max(self.interval, delay * 2))

    def _answer_instances(self, reply: pykka.ThreadingFuture) -> None:
        try:
            reply.set(read_instances(self.link))
        except LinkDown as exc:
            reply.set_exception((LinkDown, exc, None))


def read_instances(link: RedisLink) -> list[dict]:
    """Every live instance's entry, sorted by name (SCAN, never KEYS: Redis may be shared)."""
    def read(r) -> list:
        keys = sorted(r.scan_iter(match=link.key("instance", "*"), count=200))
        return r.mget(keys) if keys else []
    out = []
    for raw in link.run(read):
        if raw is None:
            continue  # expired between SCAN and MGET
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return sorted(out, key=lambda e: str(e.get("instance")))


def instances_status(ref: Any, timeout: float = 3.0) -> list[dict] | dict:
    """For /status: the instances, or {"error": why} when Redis cannot be read."""
    future = pykka.ThreadingFuture()
    if not tell(ref, GetInstances(future)):
        return {"error": "the instance registry has stopped"}
    try:
        return future.get(timeout=timeout)
    except Exception as exc:  # LinkDown, a timeout, a stopped registry: the report says so
        return {"error": str(exc) or type(exc).__name__}
