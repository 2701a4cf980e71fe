"""ClusterMember: what one instance starts to take part in its cluster, once it knows the URL it
serves on (wiring only, like Runtime: the state lives in the actors it starts)."""
from __future__ import annotations

import pykka
from loguru import logger

from actors.cluster.instances import InstanceRegistry, instances_status
from actors.cluster.link import RedisLink
from actors.cluster.settings import ClusterConfig, shown_redis

STOP_TIMEOUT_S = 3.0


class ClusterMember:
    """The link to Redis and the instance registry of one instance; status for /status."""

    def __init__(self, config: ClusterConfig) -> None:
        self.config = config
        self.link: RedisLink | None = None
        self.instances: pykka.ActorRef | None = None

    def start(self, served_url: str) -> None:
        if self.link is not None:
            return
        self.config = self.config.named(served_url)
        self.link = RedisLink(self.config.redis, self.config.prefix)
        self.instances = InstanceRegistry.start(self.link, self.config)
        logger.info("cluster: instance {} at {} joins through Redis {}", self.config.instance,
                    self.config.advertise, shown_redis(self.config.redis))

    def status(self) -> dict:
        """The `cluster` entry of /status: who this is, Redis's health, and every live instance."""
        out = {"instance": self.config.instance, "advertise": self.config.advertise, "lease_s": self.config.lease}
        if self.link is None:
            return {**out, "up": False, "reason": "not started (troupe has no HTTP address yet)", "instances": []}
        out.update(self.link.status())
        out["instances"] = instances_status(self.instances) if self.instances is not None else []
        return out

    def stop(self) -> None:
        if self.instances is not None:
            try:
                self.instances.stop(timeout=STOP_TIMEOUT_S)
            except (pykka.Timeout, pykka.ActorDeadError):
                pass
        if self.link is not None:
            self.link.close()
