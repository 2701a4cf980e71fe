"""HealthChecker actor: probes services that are not connected, emits HealthChanged on transitions."""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable

import gevent
import gevent.pool
import pykka
from loguru import logger

from actors.events.bus import BusClient
from actors.settings.config import ServerConfig
from actors.discovery.messages import CheckHealth, GetHealth, SetServices, fail, resolve
from actors.discovery.probe import probe as default_probe
from actors.events.kinds import HealthChanged
from actors.trust import provenance as trust

__all__ = ["HealthChecker", "CheckHealth", "GetHealth", "SetServices"]

DEFAULT_INTERVAL = 60.0
DEFAULT_TIMEOUT = 10.0
DEFAULT_CONCURRENCY = 4
FIRST_CHECK_DELAY = 3.0  # a new service is probed this long after it appears
STOP_TIMEOUT = 6.0  # probes being stopped get this long to close their transports
CONNECTED = "connected"


@dataclass(frozen=True, slots=True)
class _Tick:
    """Told by the schedule greenlet (every interval, all services) or the first-check timer
    (services just added) to its HealthChecker: probe these scheduled services now."""

    names: tuple | None = None  # None = all


@dataclass(frozen=True, slots=True)
class _ProbeDone:
    """Told by a probe greenlet to its HealthChecker: how probing `name` went; dropped when
    `generation` is no longer the probe in flight for it (the service went away or changed)."""

    name: str
    generation: int
    healthy: bool
    detail: str
    tools: int


class _Request:
    """A CheckHealth the HealthChecker still owes an answer: the names asked, those whose probe
    has not come back yet, and the reply future."""

    __slots__ = ("names", "remaining", "reply")

    def __init__(self, names: tuple, remaining: set, reply: pykka.ThreadingFuture):
        self.names, self.remaining, self.reply = names, remaining, reply


class HealthChecker(pykka.ThreadingActor):
    """Owns the watched services' configs and last health, the probe queue and the CheckHealth
    requests still to answer. Receives SetServices, CheckHealth (reply: health by name),
    GetHealth (reply: the same, for all), and _Tick and _ProbeDone from its own greenlets;
    sends HealthChanged to the bus on each transition.

    Probes run in pooled greenlets outside the actor; their results are told back.

    A service the supervisor has connected (is_connected(name) is true) is healthy by
    that fact and is never probed. is_connected must not block: read a snapshot.
    `scheduled(config)` picks the services the schedule probes (default all); a
    CheckHealth request probes whatever it names.
    """

    def __init__(self, bus: BusClient, *, interval: float = DEFAULT_INTERVAL, timeout: float = DEFAULT_TIMEOUT,
                 concurrency: int = DEFAULT_CONCURRENCY, is_connected: Callable[[str], bool] | None = None,
                 first_check_delay: float = FIRST_CHECK_DELAY, probe: Callable | None = None,
                 scheduled: Callable[[ServerConfig], bool] | None = None,
                 allowed: Callable[[ServerConfig], bool] | None = None) -> None:
        super().__init__()
        # The trust gate, checked again right before each launch: a probe runs the server.
        self._allowed = allowed or (lambda config: trust.verdict(config, {}) == trust.ALLOWED)
        self._bus = bus
        self._interval = interval
        self._timeout = timeout
        self._is_connected = is_connected or (lambda name: False)
        self._first_delay = first_check_delay
        self._probe = probe or default_probe
        self._scheduled = scheduled or (lambda config: True)
        self._concurrency = max(1, concurrency)
        self._running = 0  # probes whose _ProbeDone has not arrived yet
        self._probes = gevent.pool.Group()
        self._configs: dict = {}
        self._health: dict[str, dict] = {}
        self._queue: deque[str] = deque()
        self._in_flight: dict[str, int] = {}
        self._generations = itertools.count(1)
        self._requests: list[_Request] = []
        self._timers: list[gevent.Greenlet] = []

    # ---------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        if self._interval > 0:
            self._timers.append(gevent.spawn(self._schedule))

    def _schedule(self) -> None:
        while True:
            gevent.sleep(self._interval)
            if not self._tell(_Tick()):
                return

    def _tell(self, message) -> bool:
        try:
            self.actor_ref.tell(message)
            return True
        except pykka.ActorDeadError:
            return False

    def on_stop(self) -> None:
        for timer in self._timers:
            timer.kill(block=False)
        # bounded: each probe's `finally` closes its transport (and kills its child)
        self._probes.kill(block=True, timeout=STOP_TIMEOUT)
        for req in self._requests:
            fail(req.reply, RuntimeError("health checker stopped"))
        self._requests = []

    # ---------------------------------------------------------------- messages

    def on_receive(self, message):
        match message:
            case SetServices(configs=configs):
                self._set_services(configs)
            case CheckHealth(name=name, reply=reply):
                self._check(name, reply)
            case GetHealth(reply=reply):
                resolve(reply, {n: dict(self._state(n)) for n in sorted(self._configs)})
            case _Tick(names=names):
                due = names if names is not None else tuple(self._configs)
                self._enqueue(tuple(n for n in due if n in self._configs and self._scheduled(self._configs[n])))
            case _ProbeDone():
                self._probe_done(message)
            case _:
                logger.warning("health: unknown message {!r}", message)

    def _set_services(self, configs) -> None:
        new = {c.name: c for c in configs}
        fresh = [n for n, c in new.items() if self._configs.get(n) != c]
        for name in set(self._configs) - set(new):
            self._health.pop(name, None)
            self._in_flight.pop(name, None)  # its late result will be dropped
        for name in fresh:
            self._health.pop(name, None)  # a changed launch line is a new server: unknown again
        self._configs = new
        self._queue = deque(n for n in self._queue if n in new)
        for req in self._requests:
            req.remaining &= set(new)
        for name in fresh:
            # a probe of the old launch line answers nothing: probe the new one instead
            if self._in_flight.pop(name, None) is not None and any(name in r.remaining for r in self._requests):
                self._queue.append(name)
        self._pump()
        self._answer_done()
        if fresh and self._interval > 0:
            self._timers = [t for t in self._timers if not t.dead]
            self._timers.append(gevent.spawn_later(self._first_delay, self._tell, _Tick(tuple(fresh))))

    def _check(self, name: str | None, reply) -> None:
        if name is not None and name not in self._configs:
            fail(reply, LookupError(f"unknown service {name!r}"))
            return
        names = (name,) if name is not None else tuple(sorted(self._configs))
        waiting = self._enqueue(names)
        self._requests.append(_Request(names, waiting, reply))
        self._answer_done()

    def _enqueue(self, names) -> set:
        """Queue the names for probing (connected ones are settled at once); returns
        the names whose answer is still to come."""
        waiting = set()
        for name in names:
            if name not in self._configs:
                continue
            if self._connected(name):
                self._record(name, True, CONNECTED, self._health.get(name, {}).get("tools", 0))
                continue
            waiting.add(name)
            if name not in self._in_flight and name not in self._queue:
                self._queue.append(name)
        self._pump()
        return waiting

    def _connected(self, name: str) -> bool:
        try:
            return bool(self._is_connected(name))
        except Exception:
            logger.exception("health: is_connected({}) failed", name)
            return False

    def _pump(self) -> None:
        # counted by our own messages, not a Pool: a full Pool.spawn would block the actor,
        # and a finished probe's greenlet still holds its slot while it tells us the result
        while self._queue and self._running < self._concurrency:
            name = self._queue.popleft()
            if not self._allowed(self._configs[name]):
                # unknown, not unhealthy: nothing was run, so nothing is known about it
                self._health[name] = {"healthy": None, "checked_at": None, "tools": 0,
                                      "detail": f"not probed: {self._configs[name].provenance} server, not approved"}
                for req in self._requests:
                    req.remaining.discard(name)
                self._answer_done()
                continue
            gen = next(self._generations)
            self._in_flight[name] = gen
            self._running += 1
            self._probes.spawn(self._run_probe, name, gen, self._configs[name])

    def _run_probe(self, name: str, gen: int, config) -> None:
        try:
            healthy, detail, tools = self._probe(config, self._timeout)
        except Exception as exc:
            healthy, detail, tools = False, f"probe crashed: {type(exc).__name__}: {exc}", 0
        self._tell(_ProbeDone(name, gen, bool(healthy), str(detail), int(tools or 0)))

    def _probe_done(self, done: _ProbeDone) -> None:
        self._running -= 1
        if self._in_flight.get(done.name) != done.generation:
            self._pump()
            return  # the service went away or changed while it was probed
        del self._in_flight[done.name]
        if self._connected(done.name):
            self._record(done.name, True, CONNECTED, done.tools)
        else:
            self._record(done.name, done.healthy, done.detail, done.tools)
        for req in self._requests:
            req.remaining.discard(done.name)
        self._answer_done()
        self._pump()

    def _record(self, name: str, healthy: bool, detail: str, tools: int) -> None:
        before = self._health.get(name, {}).get("healthy")
        self._health[name] = {"healthy": healthy, "detail": detail, "checked_at": time.time(), "tools": tools}
        if before != healthy:  # transitions only, unknown → known included
            self._bus.publish(HealthChanged(name, healthy, reason=detail))

    def _state(self, name: str) -> dict:
        return self._health.get(name) or {"healthy": None, "detail": "not checked yet", "checked_at": None,
                                          "tools": 0}

    def _answer_done(self) -> None:
        done = [r for r in self._requests if not r.remaining]
        self._requests = [r for r in self._requests if r.remaining]
        for req in done:
            resolve(req.reply, {n: dict(self._state(n)) for n in req.names if n in self._configs})
