"""RedisLink: one instance's connection to Redis, and the one place that knows whether Redis is up.

redis-py's sockets are gevent's once troupe has patched, so a command waits like any other I/O.
Every command goes through `run`, which bounds it (socket timeouts) and turns a failure into
LinkDown after noting it: /status says Redis is down and why, the caller decides what a missing
answer means, and the next command that succeeds marks the link up again. Nothing here retries
on its own; the heartbeat is what probes a link that is down, with backoff.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from loguru import logger

from actors.cluster.settings import shown_redis

COMMAND_TIMEOUT_S = 2.0  # a Redis that does not answer in this long is down, for this command


class LinkDown(Exception):
    """Redis did not answer a command (refused, timed out, or errored): one line saying why."""


class RedisLink:
    """A redis-py client with its health: `up`, `since` and `reason` for /status. Keys are built
    with `key(...)` under the cluster's prefix, so several clusters may share one Redis."""

    def __init__(self, url: str, prefix: str = "troupe", timeout: float = COMMAND_TIMEOUT_S) -> None:
        try:
            import redis
        except ImportError:  # the single-instance install does not pull it in
            raise RuntimeError("cluster mode needs the redis package: pip install 'mcp-troupe[cluster]'") from None
        self._errors = (redis.RedisError, OSError)
        # `timeout`: a link on a hot path (actors/ratelimit/shared.py) gives up far sooner
        self.client = redis.Redis.from_url(url, socket_timeout=timeout,
                                           socket_connect_timeout=timeout, retry_on_timeout=False)
        self.url, self.prefix = url, prefix
        self.up = False
        self.failed = False  # the last command failed (not merely: none made yet)
        self.since = time.time()
        self.reason = "not connected yet"

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def run(self, command: Callable[[Any], Any]) -> Any:
        """`command(client)`'s result; LinkDown if Redis fails it (the link is then marked down)."""
        try:
            result = command(self.client)
        except self._errors as exc:
            self._down(f"{type(exc).__name__}: {exc}")
            raise LinkDown(self.reason) from None
        if not self.up:
            self.up, self.failed, self.since, self.reason = True, False, time.time(), ""
            logger.info("cluster: Redis at {} is up", shown_redis(self.url))
        return result

    def _down(self, reason: str) -> None:
        if self.up or self.reason != reason:
            logger.warning("cluster: Redis at {} is down: {}", shown_redis(self.url), reason)
        if self.up:
            self.since = time.time()
        self.up, self.failed, self.reason = False, True, reason

    def status(self) -> dict:
        return {"redis": shown_redis(self.url), "up": self.up, "since": self.since, "reason": self.reason}

    def close(self) -> None:
        try:
            self.client.close()
        except self._errors:
            pass
