"""How the Runtime starts the CacheKeeper (its backend chosen by the config's `cache:` section) and
reads its figures for /status."""
from __future__ import annotations

import pykka

from actors.caching.keeper import CacheKeeper
from actors.caching.messages import GetCacheStats
from actors.caching.redis_store import RedisEntries
from actors.settings.cache_section import check_backend

STATS_TIMEOUT = 1.0  # the status report waits this long at most for the cache's figures


def start_keeper(config, bus, shared) -> pykka.ActorRef:
    """The CacheKeeper for `config.cache`: in memory, or in the cluster's Redis (through `shared`,
    the cluster's SharedState, whose link and key prefix it uses)."""
    problems = check_backend(config.cache, config.cluster)
    if problems:
        raise ValueError(problems[0])
    remote = RedisEntries(shared.link) if config.cache.backend == "redis" and shared is not None else None
    return CacheKeeper.start(config.cache.max_bytes, bus, remote)


def cache_status(ref: pykka.ActorRef | None, timeout: float = STATS_TIMEOUT) -> dict:
    """The cache section of /status (edge code only: it waits, bounded)."""
    if ref is None:
        return {}
    future = pykka.ThreadingFuture()
    try:
        ref.tell(GetCacheStats(future))
        return future.get(timeout=timeout)
    except (pykka.ActorDeadError, pykka.Timeout) as exc:
        return {"error": f"the cache did not answer: {type(exc).__name__}"}
