"""ClusterMember: what one instance starts to take part in its cluster, once it knows the URL it
serves on (wiring only, like Runtime: the state lives in the actors it starts).

Joining takes Redis: the cluster secret that relays between instances present (configured, or
created once in Redis by the first instance: SET NX, then every instance reads the same one),
then the lease keeper. A Redis that is down at start delays joining, with backoff, never the
start of troupe; until it has joined, this instance runs no `single` server.
"""
from __future__ import annotations

import secrets

import gevent
import pykka
from loguru import logger

from actors.cluster.instances import InstanceRegistry, instances_status
from actors.cluster.leases import JoinedCluster, LeaseKeeper
from actors.cluster.link import LinkDown, RedisLink
from actors.cluster.settings import ClusterConfig, shown_redis
from actors.published import Published
from actors.tells import tell

STOP_TIMEOUT_S = 3.0
JOIN_RETRY_MAX_S = 10.0


class ClusterMember:
    """The link to Redis, the instance registry and the lease keeper of one instance; the cluster
    secret and the servers this instance owns, for the relay endpoint; status for /status."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.link: RedisLink | None = None
        self.instances: pykka.ActorRef | None = None
        self.keeper: pykka.ActorRef | None = None
        # The servers this instance holds a lease for: the LeaseKeeper alone gets the Publisher.
        self.owned, self._owned_writer = Published.create(frozenset())
        self.token: str | None = None  # set once joined; relays are refused until then
        self._joining: gevent.Greenlet | None = None

    def start(self, served_url: str, supervisor: pykka.ActorRef, auth_token: str | None) -> None:
        if self.link is not None:
            return
        self.config = self.config.named(served_url)
        self.link = RedisLink(self.config.redis, self.config.prefix)
        self.instances = InstanceRegistry.start(self.link, self.config)
        logger.info("cluster: instance {} at {} joins through Redis {}", self.config.instance,
                    self.config.advertise, shown_redis(self.config.redis))
        self._joining = gevent.spawn(self._join, supervisor, auth_token)

    def _join(self, supervisor: pykka.ActorRef, auth_token: str | None) -> None:
        delay = 0.5
        while self.token is None:
            try:
                self.token = self.config.token or self._shared_secret()
            except LinkDown as exc:
                logger.warning("cluster: cannot join yet ({}); retrying in {:g}s", exc, delay)
                gevent.sleep(delay)
                delay = min(JOIN_RETRY_MAX_S, delay * 2)
        assert self.link is not None
        writer, self._owned_writer = self._owned_writer, None  # handed over: only the keeper publishes
        assert writer is not None  # start() runs once (self.link guards it)
        self.keeper = LeaseKeeper.start(self.link, self.config, supervisor, self.instances, writer)
        tell(supervisor, JoinedCluster(self.keeper, self.token, auth_token))

    def _shared_secret(self) -> str:
        assert self.link is not None
        key = self.link.key("secret", "relay")
        self.link.run(lambda r: r.set(key, secrets.token_urlsafe(32), nx=True))
        raw = self.link.run(lambda r: r.get(key))
        if not raw:
            raise LinkDown("the cluster secret vanished from Redis")
        return raw.decode("ascii")

    def owns(self, server: str) -> bool:
        return server in self.owned.current

    def status(self) -> dict:
        """The `cluster` entry of /status: who this is, Redis's health, and every live instance."""
        out = {"instance": self.config.instance, "advertise": self.config.advertise, "lease_s": self.config.lease,
               "joined": self.token is not None, "owned": sorted(self.owned.current)}
        if self.link is None:
            return {**out, "up": False, "reason": "not started (troupe has no HTTP address yet)", "instances": []}
        out.update(self.link.status())
        if not self.link.up:  # the heartbeat probes Redis; /status does not wait out a timeout too
            out["instances"] = {"error": f"Redis is down: {self.link.reason}"}
        else:
            out["instances"] = instances_status(self.instances) if self.instances is not None else []
        return out

    def stop(self) -> None:
        if self._joining is not None:
            self._joining.kill(block=False)
        for ref in (self.keeper, self.instances):  # leases first: the others may take them at once
            if ref is not None:
                try:
                    ref.stop(timeout=STOP_TIMEOUT_S)
                except (pykka.Timeout, pykka.ActorDeadError):
                    pass
        if self.link is not None:
            self.link.close()
