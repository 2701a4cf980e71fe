"""The RateLimiter: every rate limit of a running troupe, checked on each client request that
reaches a server (tools/call, resources/read, prompts/get, completion/complete, and the
meta-tools that make them), before it is sent; a call past a limit is refused at once.

A call is checked against up to two buckets: its client's (the client's profile's limit, shared by
every client in that profile; or, for a client no serve.clients entry names, serve.rate) and its
server's (servers[].rate, every client's calls to it). It goes only when both have a token, and
then takes one from each.

Who owns the buckets: this object, and only through its methods. Sessions are many actors and a
profile's bucket spans them all, so the buckets cannot live in one Session; an actor of their own
would put an actor hop (and a reply to wait for) on every call. Instead every read and write of
the buckets and counters happens under this object's one lock, held for a few additions and never
across I/O or a yield, so the check costs a Session about a microsecond, in its own turn. In a
cluster the buckets live in Redis (shared.py) and the lock guards only the counters and the
figures last seen; the Redis round trip happens outside it.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from loguru import logger

from actors.cluster.link import LinkDown
from actors.ratelimit.buckets import TokenBucket
from actors.ratelimit.refusal import ANONYMOUS, ANONYMOUS_NAME, PROFILE, SERVER, Refusal
from actors.ratelimit.shared import QUIET_S, SharedBuckets
from actors.settings.rate_section import Rate, RateConfig

# What reaches a server and so counts; listings, subscriptions and troupe's own tools do not.
RATED_METHODS = frozenset({"tools/call", "resources/read", "prompts/get", "completion/complete"})
Key = tuple[str, str]  # (scope, name)


@dataclass(slots=True)
class _Figures:
    """One bucket's counters and, in a cluster, what Redis last said of it."""

    allowed: int = 0
    refused: int = 0
    fail_open: int = 0  # let through unchecked: Redis was down or slow
    seen_tokens: float | None = None  # cluster: tokens left after the last check


class RateLimiter:
    """The limits (a RateConfig), their buckets and counters (see the module's docstring).
    `admit` is the check; `reconfigure` takes a reloaded config; `report` is /status's `rates`;
    `on_refused(fn)` registers a function called with each Refusal (the audit trail's hook)."""

    def __init__(self, rates: RateConfig, shared: SharedBuckets | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()  # a gevent lock once patched; see the module's docstring
        self._clock = clock
        self._shared = shared
        self._quiet_until = 0.0  # cluster: Redis failed a check; until then calls go unchecked
        self._watchers: tuple[Callable[[Refusal], None], ...] = ()
        self._rates = rates
        self._buckets: dict[Key, TokenBucket] = {}
        self._figures: dict[Key, _Figures] = {}

    # ---------------------------------------------------------------- configuration

    def reconfigure(self, rates: RateConfig) -> None:
        """A reloaded config's limits, from now on: a bucket whose limit changed keeps its tokens
        (at most the new burst); one whose limit went is dropped, its counters with it."""
        with self._lock:
            self._rates = rates
            now = self._clock()
            wanted = dict(self._limits())
            for key in [k for k in self._buckets if k not in wanted]:
                del self._buckets[key]
            for key in [k for k in self._figures if k not in wanted]:
                del self._figures[key]
            for key, bucket in self._buckets.items():
                if bucket.rate != wanted[key]:
                    bucket.limit(wanted[key], now)

    def on_refused(self, watcher: Callable[[Refusal], None]) -> None:
        """`watcher(refusal)` is called for every refused call, on the refusing Session's greenlet,
        after the refusal is decided: it must not block (tell an actor, or append to a buffer)."""
        with self._lock:
            self._watchers = (*self._watchers, watcher)

    def _limits(self):
        """Every configured ((scope, name), limit); the caller holds the lock."""
        rates = self._rates
        for name, rate in rates.profiles.items():
            yield (PROFILE, name), rate
        for name, rate in rates.servers.items():
            yield (SERVER, name), rate
        if rates.anonymous is not None:
            yield (ANONYMOUS, ANONYMOUS_NAME), rates.anonymous

    # ---------------------------------------------------------------- the check

    def admit(self, client: str | None, profile: str | None, server: str, method: str,
              session: str = "") -> Refusal | None:
        """None when the call of `client` (its serve.clients name; None: anonymous) in `profile`
        to `server` may go (its tokens are taken); else the Refusal to answer it with. A method
        that does not reach a server (see RATED_METHODS) always goes, and costs nothing."""
        if method not in RATED_METHODS or self._rates.empty:  # one read: a reload swaps the config whole
            return None
        if self._shared is None:
            with self._lock:  # the limits and the buckets read together: a reload cannot come between
                keys = _keys(self._rates, client, profile, server)
                refusal = self._take_local(keys) if keys else None
        else:
            keys = _keys(self._rates, client, profile, server)
            refusal = self._take_shared(keys) if keys else None
        if refusal is None:
            return None
        refused = Refusal(refusal[0][0], refusal[0][1], refusal[1], refusal[2], client, profile, server, method,
                          session)
        for watcher in self._watchers:
            try:
                watcher(refused)
            except Exception:  # an audit hook's bug costs its record, never the refusal's answer
                logger.exception("a rate-limit watcher failed")
        return refused

    def _take_local(self, keys: list[tuple[Key, Rate]]) -> tuple[Key, Rate, float] | None:
        """One token from each bucket, or none: None, or (the bucket, its limit, its wait). The
        caller holds the lock."""
        now = self._clock()
        buckets = []
        worst: tuple[Key, Rate, float] | None = None
        for key, rate in keys:
            bucket = self._buckets.get(key)
            if bucket is None:  # first use: full (reconfigure keeps the others' limits current)
                bucket = self._buckets[key] = TokenBucket(rate, now)
            bucket.refill(now)
            wait = bucket.wait()
            if wait > 0 and (worst is None or wait > worst[2]):
                worst = (key, rate, wait)
            buckets.append((key, bucket))
        if worst is None:
            for key, bucket in buckets:
                bucket.take()
                self._figure(key).allowed += 1
            return None
        self._figure(worst[0]).refused += 1
        return worst[0], worst[1], _rounded(worst[2])

    def _take_shared(self, keys: list[tuple[Key, Rate]]) -> tuple[Key, Rate, float] | None:
        """The same through Redis (one script call outside the lock); when Redis fails or is
        quiet after a failure, the call goes (fail open) and is counted so."""
        assert self._shared is not None
        with self._lock:
            quiet = self._clock() < self._quiet_until
            if quiet:
                for key, _ in keys:
                    self._figure(key).fail_open += 1
                return None
        try:
            taken, figures = self._shared.take([(scope, name, rate) for (scope, name), rate in keys])
        except LinkDown as exc:
            with self._lock:
                self._quiet_until = self._clock() + QUIET_S
                for key, _ in keys:
                    self._figure(key).fail_open += 1
            logger.debug("rate limits: Redis failed a check, calls go unchecked for {}s: {}", QUIET_S, exc)
            return None
        with self._lock:
            worst: tuple[Key, Rate, float] | None = None
            for (key, rate), (tokens, wait) in zip(keys, figures):
                figure = self._figure(key)
                figure.seen_tokens = tokens
                if taken:
                    figure.allowed += 1
                elif wait > 0 and (worst is None or wait > worst[2]):
                    worst = (key, rate, wait)
            if taken or worst is None:
                return None
            self._figure(worst[0]).refused += 1
            return worst[0], worst[1], _rounded(worst[2])

    def _figure(self, key: Key) -> _Figures:
        figure = self._figures.get(key)
        if figure is None:
            figure = self._figures[key] = _Figures()
        return figure

    # ---------------------------------------------------------------- status

    def report(self) -> dict:
        """/status's `rates`: shared (in Redis) or not, and every configured bucket with its limit,
        tokens left, calls allowed, refused and let through unchecked."""
        with self._lock:
            now = self._clock()
            buckets = []
            for key, rate in self._limits():
                figure = self._figures.get(key) or _Figures()
                bucket = self._buckets.get(key)
                if self._shared is not None:
                    tokens = figure.seen_tokens
                else:
                    tokens = bucket.refill(now) if bucket is not None else float(rate.burst)
                buckets.append({"scope": key[0], "name": key[1], "limit": rate.shown(),
                                "tokens": None if tokens is None else round(tokens, 2),
                                "allowed": figure.allowed, "refused": figure.refused,
                                "fail_open": figure.fail_open})
        report: dict = {"shared": self._shared is not None, "buckets": buckets}
        if self._shared is not None:
            report["redis"] = self._shared.status()
        return report

    def close(self) -> None:
        if self._shared is not None:
            self._shared.close()


def _keys(rates: RateConfig, client: str | None, profile: str | None, server: str) -> list[tuple[Key, Rate]]:
    """The buckets a call is checked against, with their limits: its client's (the profile's, or
    the anonymous one for a client no serve.clients entry names) and its server's."""
    keys: list[tuple[Key, Rate]] = []
    if client is None:
        if rates.anonymous is not None:
            keys.append(((ANONYMOUS, ANONYMOUS_NAME), rates.anonymous))
    elif profile is not None and (found := rates.profiles.get(profile)) is not None:
        keys.append(((PROFILE, profile), found))
    if (found := rates.servers.get(server)) is not None:
        keys.append(((SERVER, server), found))
    return keys


def _rounded(wait: float) -> float:
    """A retry_after_s as clients see it: whole milliseconds, rounded up (a client that waits that
    long finds a token), and never 0 for a refused call."""
    return max(0.001, math.ceil(wait * 1000.0) / 1000.0)


def for_config(config) -> RateLimiter:
    """The RateLimiter of a loaded Config: its buckets in the cluster's Redis when it has one."""
    cluster = config.cluster
    shared = SharedBuckets(cluster.redis, cluster.prefix) if cluster is not None else None
    return RateLimiter(config.rates, shared)
