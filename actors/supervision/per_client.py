"""The Supervisor's book of `share: per_client` upstreams: each downstream client's own Connection
of a server, started on that client's first call, supervised like any server (backoff, circuit)
and stopped when the client goes.

The server's own Child (the "template") still runs and lists the catalogue, so every client sees
the same names and the same pins; a client's own upstream lists nothing into the catalogue
(it has no registry), and every request it sends to a client goes to its one client.
"""
from __future__ import annotations

import itertools
import time
from collections import Counter
from types import MappingProxyType
from typing import Any, Callable

import gevent
import pykka
from loguru import logger

from actors.events.kinds import ResourceUpdated, ServerLogged
from actors.messages import (CancelForward, ConnectionCounts, ConnectionDegraded, ConnectionFailed, ConnectionReady,
                             ConnectionRetired, EraLearned, Forward, SetLogLevel, UpstreamError)
from actors.protocol import jsonrpc
from actors.supervision.child import Child
from actors.supervision.client_route import CLOSED_STATES, ClientLeft, ClientRestartDue, ForClient, SweepClients, why
from actors.supervision.states import CALLABLE_STATES, ServerState
from actors.tells import tell as _tell

SWEEP_EVERY = 1.0  # how often the book looks for upstreams whose client is gone without a ClientLeft
# What a client's own Connection reports to the Supervisor, under its (negative) generation.
REPORTS = (ConnectionReady, ConnectionFailed, ConnectionCounts, ConnectionDegraded, ConnectionRetired, EraLearned)

Starter = Callable[[Child, Any], pykka.ActorRef]  # (its record, the client's Session) → a started Connection


class ClientUpstream:
    """One client's own upstream of one server: the Child record that supervises it (state, ref,
    generation, failures, restart timer), the client's Session, its serve.clients name (None: a
    client with no name), a serial number the status report shows in place of the Session's key,
    and the Forwards that came before it was ready."""

    __slots__ = ("child", "owner", "urn", "client", "serial", "queued")

    def __init__(self, child: Child, owner, urn: str, client: str | None, serial: int) -> None:
        self.child, self.owner, self.urn, self.client, self.serial = child, owner, urn, client, serial
        self.queued: list[Forward] = []

    @property
    def label(self) -> str:
        return f"{self.child.config.name} for {self.client or 'client'} #{self.serial}"

    def status(self) -> dict:
        child = self.child
        return {"id": self.serial, "client": self.client, "state": child.state, "since": child.since,
                "reason": child.reason, "restarts": child.restarts,
                "pid": (child.endpoint or {}).get("pid") if child.callable else None}


class ClientUpstreams:
    """Owns every ClientUpstream, by (server, client urn) and by generation. A plain object used
    only in the Supervisor's greenlet: the Supervisor hands it ForClient, ClientLeft, its own
    timers and what a client's own Connection reports (told apart by a negative generation, so the
    shared Child's checks never match it); it starts Connections through `start`."""

    def __init__(self, supervisor: pykka.ActorRef, start: Starter) -> None:
        self._supervisor, self._start = supervisor, start
        self._entries: dict[tuple[str, str], ClientUpstream] = {}
        self._by_generation: dict[int, ClientUpstream] = {}
        self._generations = itertools.count(-1, -1)
        self._serials = itertools.count(1)
        self._sweep: gevent.Greenlet | None = None

    def receive(self, message, template_of: Callable[[str], Child | None], allowed: Callable[[Child], bool]) -> bool:
        """Handle `message` if it is this book's (True): ForClient, ClientLeft, its timers, or a report
        of a client's own Connection. `template_of(name)` is the server's own Child; `allowed(child)`
        is the trust gate's verdict on it."""
        match message:
            case _ if self.owns(message):
                self.report(message, template_of(message.server))
            case ForClient(server=name):
                template = template_of(name)
                self.for_client(message, template, template is not None and allowed(template))
            case ClientLeft(client=urn):
                self.client_left(urn)
            case ClientRestartDue():
                self.restart_due(message)
            case SweepClients():
                self.sweep()
            case _:
                return False
        return True

    # ---------------------------------------------------------------- calls

    def for_client(self, msg: ForClient, template: Child | None, allowed: bool) -> None:
        """A Forward (start the upstream if need be, hand it on when ready) or a CancelForward."""
        entry = self._entries.get((msg.server, msg.client))
        fwd = msg.message
        if isinstance(fwd, CancelForward):
            if entry is not None:
                self._cancel_queued(entry, fwd)
                if entry.child.ref is not None:
                    _tell(entry.child.ref, fwd)
            return
        if not isinstance(fwd, Forward):
            logger.warning("supervisor: {!r} for a client's upstream is not a Forward", fwd)
            return
        if template is None or not allowed or template.state in CLOSED_STATES:
            reason = "is not configured" if template is None else f"is {template.state}"
            _answer(fwd, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {msg.server} {reason}", server=msg.server))
            return
        if entry is None:
            entry = self._open(template, fwd, msg.client, msg.owner)
        child = entry.child
        if child.callable and _tell(child.ref, fwd):
            return
        if child.state == ServerState.STARTING:
            if len(entry.queued) >= child.config.max_queued:
                _answer(fwd, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"{entry.label} is starting with "
                                           f"{len(entry.queued)} calls waiting already", server=msg.server))
            else:
                entry.queued.append(fwd)
            return
        _answer(fwd, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why(child.view(), f"server {msg.server} "
                                   "(this client's own upstream)"), server=msg.server))

    def _open(self, template: Child, fwd: Forward, urn: str, owner=None) -> ClientUpstream:
        child = Child(template.spec, template.policy)
        entry = ClientUpstream(child, owner if owner is not None else fwd.origin, urn, fwd.client, next(self._serials))
        self._entries[(template.config.name, urn)] = entry
        self._spawn(entry)
        if self._sweep is None:
            self._sweep = gevent.spawn_later(SWEEP_EVERY, _tell, self._supervisor, SweepClients())
        return entry

    def _spawn(self, entry: ClientUpstream) -> None:
        child = entry.child
        self._by_generation.pop(child.generation, None)
        child.generation = next(self._generations)
        self._by_generation[child.generation] = entry
        self._set_state(entry, ServerState.STARTING, "connecting")
        child.ref = self._start(child, entry.owner)

    # ---------------------------------------------------------------- what its Connection reports

    @staticmethod
    def owns(message) -> bool:
        """True for a report from a client's own Connection (never the shared one's)."""
        return isinstance(message, REPORTS) and message.generation < 0

    def report(self, message, template: Child | None) -> None:
        entry = self._by_generation.get(message.generation)
        match message:
            case ConnectionRetired(stats=stats) if template is not None:
                template.retired = template.retired.plus(stats)  # its calls count in the server's totals
            case _ if entry is None or entry.child.ref is None:
                return  # a stopped one's late news
            case ConnectionReady():
                self._ready(entry, message)
            case ConnectionFailed(reason=reason):
                self._failed(entry, reason)
            case ConnectionCounts():
                entry.child.counts = (message.tools, message.resources, message.prompts)
            case ConnectionDegraded(ok=ok, reason=reason) if entry.child.state in CALLABLE_STATES:
                self._set_state(entry, ServerState.READY if ok else ServerState.DEGRADED, reason)

    def _ready(self, entry: ClientUpstream, msg: ConnectionReady) -> None:
        child = entry.child
        child.counts, child.server_info, child.endpoint = (msg.tools, msg.resources, msg.prompts), \
            msg.server_info, msg.endpoint
        child.ready_at, child.settled = time.time(), True
        self._set_state(entry, ServerState.READY, "")
        queued, entry.queued = entry.queued, []
        for fwd in queued:  # in arrival order: the calls that waited for the start
            if not _tell(child.ref, fwd):
                _answer(fwd, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"{entry.label} went away",
                                           server=child.config.name))

    def _failed(self, entry: ClientUpstream, reason: str) -> None:
        child = entry.child
        assert child.ref is not None  # report() passes only a live one
        child.ref.stop(block=False)
        child.ref = None
        self._fail_queued(entry, f"{entry.label} could not start: {reason}")
        failures = child.note_failure(time.time())
        child.settled = True
        if failures > child.policy.intensity:
            self._set_state(entry, ServerState.FAILED, f"circuit open after {failures} failures in "
                                                       f"{child.policy.period:g}s; last: {reason}")
            self._schedule(entry, child.policy.cooldown)
        else:
            delay = child.policy.backoff(failures)
            self._set_state(entry, ServerState.BACKOFF, f"{reason}; restarting in {delay:.2f}s")
            child.restarts += 1
            self._schedule(entry, delay)

    def _schedule(self, entry: ClientUpstream, delay: float) -> None:
        child = entry.child
        child.cancel_timer()
        child.timer_id += 1
        child.timer = gevent.spawn_later(delay, _tell, self._supervisor,
                                         ClientRestartDue(child.config.name, entry.urn, child.timer_id))

    def restart_due(self, msg: ClientRestartDue) -> None:
        entry = self._entries.get((msg.server, msg.client))
        if entry is not None and entry.child.timer_id == msg.attempt_id \
                and entry.child.state in (ServerState.BACKOFF, ServerState.FAILED):
            entry.child.timer = None
            self._spawn(entry)

    # ---------------------------------------------------------------- ends

    def client_left(self, urn: str, reason: str = "its client went away") -> None:
        for key in [k for k in self._entries if k[1] == urn]:
            self._stop(key, reason)

    def server_stopped(self, server: str, reason: str) -> None:
        """The server itself stopped (operator, removal, config change, approval withdrawn): so does
        every client's own upstream of it; a client's next call starts a new one."""
        for key in [k for k in self._entries if k[0] == server]:
            self._stop(key, reason)

    def sweep(self) -> None:
        """Stop the upstreams whose Session is gone; look again while any are left."""
        self._sweep = None
        for key, entry in list(self._entries.items()):
            alive = getattr(entry.owner, "is_alive", None)
            if alive is not None and not alive():
                self._stop(key, "its client's session is gone")
        if self._entries:
            self._sweep = gevent.spawn_later(SWEEP_EVERY, _tell, self._supervisor, SweepClients())

    def stop_all(self) -> list:
        """Every upstream told to stop (the Supervisor stops); their stop futures."""
        futures = []
        for entry in self._entries.values():
            entry.child.cancel_timer()
            self._fail_queued(entry, f"{entry.label} stopped: troupe is stopping")
            if entry.child.ref is not None:
                futures.append(entry.child.ref.stop(block=False))
                entry.child.ref = None
        if self._sweep is not None:
            self._sweep.kill(block=False)
        self._entries.clear()
        self._by_generation.clear()
        return futures

    def _stop(self, key: tuple[str, str], reason: str) -> None:
        entry = self._entries.pop(key)
        self._by_generation.pop(entry.child.generation, None)
        entry.child.cancel_timer()
        self._fail_queued(entry, f"{entry.label} stopped: {reason}")
        if entry.child.ref is not None:
            entry.child.ref.stop(block=False)
            entry.child.ref = None
        logger.bind(server=entry.child.config.name).info("{} stopped ({})", entry.label, reason)

    # ---------------------------------------------------------------- reads

    def views(self) -> MappingProxyType:
        """What the Directory shows: each client's upstream as a frozen ServerView."""
        return MappingProxyType({key: entry.child.view() for key, entry in self._entries.items()})

    def summary(self, server: str) -> dict:
        """The status report's `per_client` of one server: how many, in which states, and each."""
        mine = [entry for (name, _), entry in self._entries.items() if name == server]
        return {"count": len(mine), "states": dict(Counter(str(entry.child.state) for entry in mine)),
                "upstreams": [entry.status() for entry in mine]}

    def set_log_level(self, level: str) -> None:
        for entry in self._entries.values():
            if entry.child.callable:
                _tell(entry.child.ref, SetLogLevel(level))

    # ---------------------------------------------------------------- helpers

    def _set_state(self, entry: ClientUpstream, state: ServerState, reason: str) -> None:
        child = entry.child
        if child.state != state:
            child.since = time.time()
            logger.bind(server=child.config.name).info("{}: {} → {}{}", entry.label, child.state, state,
                                                       f" ({reason})" if reason else "")
        child.state, child.reason = state, reason

    @staticmethod
    def _cancel_queued(entry: ClientUpstream, cancel: CancelForward) -> None:
        entry.queued = [fwd for fwd in entry.queued if fwd.origin != cancel.origin or (
            cancel.origin_request is not None and fwd.origin_request != cancel.origin_request)]

    @staticmethod
    def _fail_queued(entry: ClientUpstream, text: str) -> None:
        queued, entry.queued = entry.queued, []
        for fwd in queued:
            _answer(fwd, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, text, server=entry.child.config.name))


def _answer(fwd: Forward, outcome) -> None:
    """A Forward's one answer from here (its on_reply only tells its Session)."""
    try:
        fwd.on_reply(outcome)
    except Exception:
        logger.exception("a reply handler failed")


class OwnerBus:
    """The bus of a client's own upstream: what it says unasked (log lines, resource updates) is
    news for its one client, told to that Session alone (a Session takes these events as it takes
    them from the bus); its list changes touch no catalogue, so they go nowhere."""

    __slots__ = ("owner",)

    def __init__(self, owner) -> None:
        self.owner = owner

    def publish(self, event) -> None:
        if isinstance(event, (ServerLogged, ResourceUpdated)):
            _tell(self.owner, event)


class OwnedRoute:
    """The router of a client's own upstream: every request it sends goes to its one client,
    whether or not a call of that client is in flight (`route` is the Supervisor's router).
    `owner` says so to the Connection's ServerMessages, which then asks nobody else."""

    __slots__ = ("route", "owner")

    def __init__(self, route, owner) -> None:
        self.route, self.owner = route, owner

    def __call__(self, request, _origin):
        return self.route(request, self.owner)
