"""State every instance of a cluster shares through Redis, so any instance behaves the same:
the trust ledger (operator decisions, pins, withheld definitions), discovery registrations,
the MRTR requestState sealing key, the servers' protocol eras, and the event bus (see bridge.py).

A single troupe keeps these in files beside its config (approvals.json, services.db,
request-state.key). In a cluster Redis is the source of truth and those files are not written:
the one exception is the first use of the approvals in a Redis that has none yet, when this
instance's approvals file seeds them (SET NX: the first instance to get there wins), so turning
an existing troupe into a cluster keeps what its operator approved.
"""
from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any, Callable, Mapping

import gevent
import orjson
from loguru import logger

from actors.cluster.bridge import EventBridge
from actors.cluster.link import LinkDown, RedisLink
from actors.cluster.settings import ClusterConfig
from actors.events.bus import BusClient
from actors.trust.ledger import FORMAT_VERSION, Ledger, LedgerError

KEY_BYTES = 32


class SharedState:
    """A RedisLink of its own (the cluster member's may not exist yet: the trust keeper starts
    before troupe knows its URL) and the Redis-backed stand-ins for a single troupe's files."""

    def __init__(self, config: ClusterConfig) -> None:
        self.link = RedisLink(config.redis, config.prefix)
        self.bridge: EventBridge | None = None

    def ledger(self, file_path: str) -> "RedisLedger":
        return RedisLedger(self.link, file_path)

    def store(self) -> "RedisStore":
        return RedisStore(self.link)

    def eras(self) -> "EraBook":
        return EraBook(self.link)

    def state_key(self) -> bytes:
        """The cluster's requestState key: created once (SET NX), then the same for every instance,
        so a requestState sealed by one instance opens on another. LinkDown while Redis is down
        (the sealer asks again at its next use)."""
        key = self.link.key("secret", "state")
        self.link.run(lambda r: r.set(key, secrets.token_bytes(KEY_BYTES).hex(), nx=True))
        raw = self.link.run(lambda r: r.get(key))
        if not raw:
            raise LinkDown("the requestState key vanished from Redis")
        return bytes.fromhex(raw.decode("ascii"))

    def start_bridge(self, bus: BusClient, instance: str) -> None:
        if self.bridge is None:
            self.bridge = EventBridge(self.link, bus, instance).start()

    def stop(self) -> None:
        if self.bridge is not None:
            self.bridge.stop()
        self.link.close()


class RedisLedger:
    """The trust Ledger's interface (stamp, read, update) on two Redis keys: the approvals
    document as JSON and a revision counter the TrustKeeper polls instead of a file's mtime.
    Each update is an optimistic transaction (WATCH the document), so two instances deciding at
    once both land. Redis failing is a LedgerError: the keeper keeps its last good snapshot."""

    def __init__(self, link: RedisLink, file_path: str) -> None:
        self.link = link
        self.doc, self.rev = link.key("approvals"), link.key("approvals", "rev")
        self.path = f"Redis {self.doc}"  # what the keeper's log lines name
        self._file = Ledger(file_path)

    def _run(self, command: Callable[[Any], Any]) -> Any:
        try:
            return self.link.run(command)
        except LinkDown as exc:
            raise LedgerError(f"{self.path}: Redis is down ({exc})") from None

    def stamp(self) -> tuple | None:
        raw = self._run(lambda r: r.get(self.rev))
        return None if raw is None else (int(raw),)

    def _parse(self, raw: bytes | None) -> dict | None:
        if raw is None:
            return None
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise LedgerError(f"{self.path}: not valid JSON ({exc})") from None
        if not isinstance(data, dict) or not isinstance(data.get("servers", {}), dict):
            raise LedgerError(f"{self.path}: not an approvals document (no servers mapping)")
        data.setdefault("servers", {})
        return data

    def _seed(self) -> dict:
        """This instance's file, when Redis holds no approvals yet (an unreadable file: none)."""
        try:
            return self._file.read()
        except LedgerError as exc:
            logger.warning("trust: {}; the cluster's approvals start empty", exc)
            return {"version": FORMAT_VERSION, "servers": {}}

    def read(self) -> dict:
        data = self._parse(self._run(lambda r: r.get(self.doc)))
        if data is not None:
            return data
        seed = self._seed()
        if self._run(lambda r: r.set(self.doc, orjson.dumps(seed), nx=True)):
            self._run(lambda r: r.incr(self.rev))
            logger.info("trust: the cluster's approvals seeded from {}", self._file.path)
            return seed
        return self._parse(self._run(lambda r: r.get(self.doc))) or seed

    def update(self, change: Callable[[dict], Any]) -> tuple[Any, dict]:
        """Apply `change(data)` to the current document and store it, retried (with the fresh
        document) when another instance wrote in between; returns (what change returned, data)."""
        out: dict[str, Any] = {}

        def attempt(pipe) -> None:
            data = self._parse(pipe.get(self.doc))
            if data is None:
                data = self._seed()
            out["result"] = change(data)
            data["version"] = FORMAT_VERSION
            out["data"] = data
            pipe.multi()
            pipe.set(self.doc, orjson.dumps(data))
            pipe.incr(self.rev)

        self._run(lambda r: r.transaction(attempt, self.doc))
        return out["result"], out["data"]


class RedisStore:
    """The discovery store's interface (registrations, put, delete, close) on one Redis hash:
    name → {"entry", "registered_at"} as JSON. A registration made on one instance is there for
    every other one; with Redis down, reads and writes raise LinkDown (the engine keeps what it
    read last)."""

    kind = "redis"

    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.hash = link.key("registrations")

    def registrations(self) -> dict[str, dict]:
        rows = self.link.run(lambda r: r.hgetall(self.hash))
        out = {}
        for name, raw in sorted(rows.items()):
            try:
                out[name.decode("utf-8")] = orjson.loads(raw)["entry"]
            except (orjson.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
                continue  # a row we cannot read is skipped, not fatal (as in SqliteStore)
        return out

    def put(self, name: str, entry: Mapping) -> None:
        blob = orjson.dumps({"entry": dict(entry), "registered_at": time.time()})
        self.link.run(lambda r: r.hset(self.hash, name, blob))

    def delete(self, name: str) -> bool:
        return bool(self.link.run(lambda r: r.hdel(self.hash, name)))

    def close(self) -> None:
        pass  # the link is SharedState's


class EraBook:
    """Protocol era verdicts (modern | legacy) by server identity, one Redis hash: the instance
    that probed a server says what it found, so the next one to run it (a new owner after a
    move, every instance of a replicated server) opens it in its era without probing. Identities
    are hashed (a launch line may carry secrets). A read is one HGET, not tried while Redis is
    known to be down; a write goes on a greenlet of its own, so the Supervisor never waits on Redis for it.
    With Redis down there is no verdict (the server is probed) and nothing is written."""

    def __init__(self, link: RedisLink) -> None:
        self.link = link
        self.hash = link.key("eras")

    @staticmethod
    def _field(identity: str) -> str:
        return hashlib.sha256(identity.encode("utf-8", "replace")).hexdigest()[:32]

    def get(self, identity: str) -> str | None:
        if self.link.failed:  # down: not worth a timeout on every spawn (the heartbeat probes it)
            return None
        try:
            raw = self.link.run(lambda r: r.hget(self.hash, self._field(identity)))
        except LinkDown:
            return None
        era = raw.decode("ascii", "replace") if raw else None
        return era if era in ("modern", "legacy") else None

    def put(self, identity: str, era: str) -> gevent.Greenlet:
        def write() -> None:
            try:
                self.link.run(lambda r: r.hset(self.hash, self._field(identity), era))
            except LinkDown:
                pass  # the next instance probes, as a troupe alone does
        return gevent.spawn(write)
