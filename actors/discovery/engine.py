"""DiscoveryEngine actor: runs the providers, merges their records, names services, tells the owner."""
from __future__ import annotations

import functools
import itertools
import time
from types import MappingProxyType
from typing import Any, Callable, Mapping, cast

import gevent
import pykka
from loguru import logger

from actors.events.bus import BusClient
from actors.events.kinds import DiscoveryCompleted, HealthChanged, ServiceAdded, ServiceRemoved, ServiceUpdated
from actors.discovery.cycle import CycleDone, FilesChanged, Tick, collect, tick_every
from actors.discovery.health import HealthChecker
from actors.discovery import registration
from actors.discovery.identity import which_on
from actors.discovery.merge import Service, assign_names, diff, merge, summary
from actors.discovery.messages import (
    CheckHealth,
    Discover,
    DiscoveryReport,
    GetDiscoveryStatus,
    GetHealth,
    ListServices,
    RegisterServer,
    RunDiscovery,
    ServiceRecord,
    ServicesChanged,
    SetServices,
    UnregisterServer,
    fail,
    resolve,
)
from actors.discovery.providers.lineup import start_providers
from actors.discovery.settings import DiscoverySettings, parse
from actors.discovery.store import open_store
from actors.discovery.watcher import watch
from actors.trust import provenance as trust
from actors.published import Published
from actors.trust.ledger import TrustSnapshot
from actors.trust.messages import TrustChanged
from actors.tells import tell

STOP_TIMEOUT = 8.0  # providers and the owned health checker, stopped in parallel


class DiscoveryEngine(pykka.ThreadingActor):
    """Owns the providers, the service store, the file watcher and (unless given one) a HealthChecker.

    Receives RunDiscovery (reply: DiscoveryReport), RegisterServer, UnregisterServer, ListServices,
    GetDiscoveryStatus, CheckHealth and GetHealth (forwarded), HealthChanged (from the bus),
    TrustChanged, and CycleDone, FilesChanged and Tick from its own greenlets (actors.discovery.cycle). Sends Discover
    to providers, SetServices to the checker, ServicesChanged to `on_services`, and ServiceAdded,
    ServiceUpdated, ServiceRemoved and DiscoveryCompleted to the bus.

    Settings (the config's `discovery:` section; every key optional):
      enabled (true): run providers; registrations are served either way
      interval (300): periodic re-discovery in seconds; 0 = only on file change or request
      providers (all): claude_desktop, claude_code, cursor, vscode, windsurf, troupe, path
      store (memory) | sqlite, store_path (~/.config/troupe/services.db)
      path_probe: {enabled: false, allowlist: [], auto_connect: false, timeout: 2, path: $PATH, concurrency: 8}
      auto_connect: {client_configs: true, registered: true}
      max_file_bytes (1 MiB), max_claude_json_bytes (32 MiB: Claude Code keeps history there)
      deadline (15): seconds a cycle waits for providers
      watch (true), watch_interval (1): the file watcher
      health: {enabled: true, interval: 60, timeout: 10, concurrency: 4, first_check_delay: 3}
      home, project_root: where the user-level and project-level files are looked for
    Keyword arguments home/project_root win over the settings, which win over $HOME and the cwd.
    is_connected(name) (non-blocking) lets the checker report connected servers healthy
    without probing them. CheckHealth and GetHealth sent here are forwarded to the checker.
    """

    def __init__(self, settings: Mapping | None, bus: BusClient, on_services: Callable[[ServicesChanged], None],
                 *, home: str | None = None, project_root: str | None = None, reserved_names=frozenset(),
                 health: pykka.ActorRef | None = None, is_connected: Callable[[str], bool] | None = None,
                 run_at_start: bool = True, trust_box: Published[TrustSnapshot] | None = None, store=None) -> None:
        super().__init__()
        # Read-only (the TrustKeeper owns it): a server that may not run is never health-probed.
        self._trust = trust_box or Published.constant(TrustSnapshot())
        # Bad settings and an unopenable store fail here, in the caller of start().
        self.settings: DiscoverySettings = parse(settings, home=home, project_root=project_root)
        self._bus, self._on_services = bus, on_services
        self._reserved = frozenset(reserved_names)
        self._health_ref, self._own_health = health, None
        self._is_connected, self._run_at_start = is_connected, run_at_start
        self._which = which_on(self.settings.path_search)
        # A cluster passes its Redis store: registrations are shared, whatever discovery.store says.
        self._store = store or open_store(self.settings.store, self.settings.store_path, self.settings.home)
        self._store_label = f"store:{self._store.kind}" + (
            f":{cast(Any, self._store).path}" if hasattr(self._store, "path") else "")  # SqliteStore only
        self._registered: dict[str, ServiceRecord] = {}
        self._load_registered()
        self._providers: dict[str, pykka.ActorRef] = {}
        self._results: dict[str, Any] = {}
        self._errors: dict[str, tuple] = {}
        self._named: dict[str, Service] = {}
        self._health: dict[str, bool] = {}
        self._greenlets: list[gevent.Greenlet] = []
        self._cycle_ids = itertools.count(1)
        self._cycle: int | None = None
        self._waiters: list = []
        self._next_waiters: list = []
        self._rerun = False
        self._last: dict = {}
        self._cycles = 0
        self._watched: Callable[[], tuple] = tuple  # what the watcher stats now (globs re-expanded)
        self._token = object()

    # ---------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        try:
            self._start_children()
        except Exception:
            # pykka skips on_stop when on_start fails: do not leave providers behind
            self._stop_children()
            raise

    def _start_children(self) -> None:
        s = self.settings
        if s.enabled:
            self._watched = start_providers(s, self._providers)
            if s.watch:
                self._greenlets.append(watch(self._watched, self._files_changed, s.watch_interval))
            if s.interval > 0:
                self._greenlets.append(gevent.spawn(tick_every, self.actor_ref, s.interval))
        # Guarded: the bus may deliver one more event after this engine stopped.
        self._bus.subscribe(self._token, functools.partial(tell, self.actor_ref), types=(HealthChanged.__name__,))
        if self._health_ref is None and s.health.enabled:
            # Without is_connected we cannot tell which servers the supervisor runs, so the
            # schedule leaves auto-started ones to it rather than launch a second copy of each.
            unknown = self._is_connected is None
            self._own_health = self._health_ref = HealthChecker.start(
                self._bus, interval=s.health.interval, timeout=s.health.timeout,
                concurrency=s.health.concurrency, is_connected=self._is_connected,
                first_check_delay=s.health.first_check_delay,
                scheduled=(lambda config: not config.auto_start) if unknown else None, allowed=self._may_run)
        if self._run_at_start:
            self._request_cycle(None)  # asynchronous: on_start never waits for providers

    def _files_changed(self, paths: tuple) -> None:
        tell(self.actor_ref, FilesChanged(paths))  # from the watcher: False once the engine stopped

    def on_stop(self) -> None:
        self._stop_children()
        for waiter in self._waiters + self._next_waiters:
            fail(waiter, RuntimeError("discovery engine stopped"))
        self._waiters, self._next_waiters = [], []
        self._store.close()

    def _stop_children(self) -> None:
        self._bus.unsubscribe(self._token)
        for g in self._greenlets:
            g.kill(block=False)
        children = [*self._providers.values(), *([self._own_health] if self._own_health else [])]
        stops = [ref.stop(block=False) for ref in children]
        try:
            pykka.get_all(stops, timeout=STOP_TIMEOUT)
        except pykka.Timeout:
            logger.warning("discovery: some providers did not stop within {}s", STOP_TIMEOUT)

    # ---------------------------------------------------------------- messages

    def on_receive(self, message):
        match message:
            case RunDiscovery(reply=reply):
                self._request_cycle(reply)
            case CycleDone():
                self._cycle_done(message)
            case FilesChanged(paths=paths):
                logger.info("discovery: {} changed; discovering again", ", ".join(paths))
                self._request_cycle(None)
            case Tick():
                self._request_cycle(None)
            case RegisterServer(entry=entry, reply=reply):
                self._register(entry, reply)
            case UnregisterServer(name=name, reply=reply):
                self._unregister(name, reply)
            case ListServices(reply=reply):
                resolve(reply, self._summaries())
            case GetDiscoveryStatus(reply=reply):
                resolve(reply, self._status())
            case CheckHealth() | GetHealth():
                self._forward_health(message)
            case HealthChanged(service=name, healthy=healthy):
                if name in self._named:
                    self._health[name] = healthy
            case TrustChanged():
                self._tell_health()
            case _:
                logger.warning("discovery: unknown message {!r}", message)

    def _forward_health(self, message) -> None:
        """Health questions asked of the engine go to its checker, which answers the caller."""
        if self._health_ref is None:
            fail(message.reply, RuntimeError("health checking is off (discovery.health.enabled: false)"))
            return
        if not tell(self._health_ref, message):
            fail(message.reply, RuntimeError("the health checker has stopped"))

    # ---------------------------------------------------------------- cycles

    def _request_cycle(self, reply) -> None:
        if self._cycle is None:
            if reply is not None:
                self._waiters.append(reply)
            self._start_cycle()
        else:
            # the running scan may predate what the caller just changed: answer from the next
            self._rerun = True
            if reply is not None:
                self._next_waiters.append(reply)

    def _load_registered(self) -> None:
        registered = {}
        try:
            stored = self._store.registrations()
        except Exception as exc:  # a shared store that is down: keep what was read last, never drop it
            logger.warning("discovery: registrations unavailable ({}); keeping the last read", exc)
            return
        for name, entry in stored.items():
            try:
                registered[name] = self._registration(name, entry)
            except ValueError as exc:  # a row that no longer validates is reported, not fatal
                logger.warning("discovery: stored registration {} skipped: {}", name, exc)
        self._registered = registered

    def _start_cycle(self) -> None:
        if self._store.kind == "redis":  # other instances register too: each cycle reads theirs
            self._load_registered()
        self._cycle = next(self._cycle_ids)
        futures, failed = {}, {}
        for name, ref in self._providers.items():
            future = pykka.ThreadingFuture()
            if tell(ref, Discover(future)):
                futures[name] = future
            else:
                failed[name] = f"{name}: provider is not running"
        self._greenlets = [g for g in self._greenlets if not g.dead]
        self._greenlets.append(gevent.spawn(collect, self.actor_ref, self._cycle, futures,
                                            self.settings.deadline, failed))

    def _cycle_done(self, done: CycleDone) -> None:
        if done.cycle != self._cycle:
            return
        self._cycle = None
        self._cycles += 1
        for name, result in done.results.items():
            self._results[name] = result
            self._errors[name] = tuple(f"{name}: {e}" for e in result.errors)
        for name, reason in done.failed.items():
            logger.warning("discovery: {}", reason)
            self._errors[name] = (reason,)  # its previous results stay in self._results
        errors = tuple(e for name in sorted(self._errors) for e in self._errors[name])
        self._last = {"started_at": done.started_at, "finished_at": time.time(), "duration_s": done.duration_s}
        self._apply()
        self._bus.publish(DiscoveryCompleted(found=len(self._named), duration_s=done.duration_s, errors=errors))
        report = DiscoveryReport(
            services=self._summaries(),
            per_source=MappingProxyType({n: len(r.records) for n, r in sorted(self._results.items())}),
            errors=errors, duration_s=done.duration_s, started_at=done.started_at,
            files=tuple((n, f) for n, r in sorted(self._results.items()) for f in r.reports))
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            resolve(waiter, report)
        if self._rerun:
            self._rerun = False
            self._waiters, self._next_waiters = self._next_waiters, []
            self._start_cycle()

    def _apply(self) -> None:
        """Merge everything known, name it, and announce what changed."""
        records = [r for result in self._results.values() for r in result.records]
        records += self._registered.values()
        previous = {svc.identity: name for name, svc in self._named.items()}
        named = assign_names(merge(records), self._reserved, previous)
        added, updated, removed, touched = diff(self._named, named)
        self._named = named
        for name in removed + updated:
            self._health.pop(name, None)
        for name in added:
            self._bus.publish(ServiceAdded(name, source=named[name].best.provider))
        for name in updated + touched:
            self._bus.publish(ServiceUpdated(name, source=named[name].best.provider))
        for name in removed:
            self._bus.publish(ServiceRemoved(name))
        if added or updated or removed:
            logger.info("discovery: {} added, {} updated, {} removed", len(added), len(updated), len(removed))
            change = ServicesChanged(tuple(named[n].config(n) for n in added),
                                     tuple(named[n].config(n) for n in updated), tuple(removed))
            try:
                self._on_services(change)
            except Exception:  # the owner's trouble must not stop discovery
                logger.exception("discovery: on_services failed")
        self._tell_health()

    def _may_run(self, config) -> bool:
        return trust.verdict(config, self._trust.current.decisions) == trust.ALLOWED

    def _tell_health(self) -> None:
        if self._health_ref is None:
            return
        # A server the user disabled in their client, or one that waits for approval, is
        # never launched, not even to probe it.
        configs = tuple(cfg for cfg in (svc.config(n) for n, svc in sorted(self._named.items()))
                        if cfg.enabled and self._may_run(cfg))
        if not tell(self._health_ref, SetServices(configs)):
            logger.warning("discovery: the health checker has stopped; {} services not handed to it", len(configs))

    # ---------------------------------------------------------------- registration

    def _registration(self, name: str, entry: Mapping) -> ServiceRecord:
        return registration.record(name, entry, store_label=self._store_label, home=self.settings.home,
                                   which=self._which, auto_connect=self.settings.auto_registered)

    def _register(self, entry: Any, reply) -> None:
        try:
            name, plain = registration.validate(entry, self._reserved)
            record = self._registration(name, plain)
        except ValueError as exc:
            fail(reply, exc)
            return
        try:
            # the same server registered under another name is renamed, not duplicated
            for other, rec in list(self._registered.items()):
                if other != name and rec.identity == record.identity:
                    self._store.delete(other)
                    del self._registered[other]
            self._store.put(name, plain)
        except Exception as exc:
            fail(reply, RuntimeError(f"cannot persist registration {name!r}: {exc}"))
            return
        self._registered[name] = record
        self._apply()
        svc = self._named.get(name)
        if svc is None:
            fail(reply, RuntimeError(f"registration {name!r} was stored but could not be named"))
        else:
            resolve(reply, summary(name, svc, self._health.get(name)))

    def _unregister(self, name: str, reply) -> None:
        if name not in self._registered:
            resolve(reply, False)
            return
        try:
            self._store.delete(name)
        except Exception as exc:
            fail(reply, RuntimeError(f"cannot remove registration {name!r}: {exc}"))
            return
        del self._registered[name]
        self._apply()
        resolve(reply, True)

    # ---------------------------------------------------------------- reports

    def _summaries(self) -> tuple:
        decisions = self._trust.current.decisions
        return tuple({**summary(n, svc, self._health.get(n)), "trust": trust.verdict(svc.config(n), decisions)}
                     for n, svc in sorted(self._named.items()))

    def _status(self) -> dict:
        known = [self._health.get(n) for n in self._named]
        providers = {}
        for name in sorted(set(self._providers) | set(self._results)):
            result = self._results.get(name)
            providers[name] = {"count": len(result.records) if result else 0,
                               "files": list(result.files) if result else [],
                               "duration_s": round(result.duration_s, 3) if result else None,
                               "errors": list(self._errors.get(name, ()))}
        return {
            "enabled": self.settings.enabled, "running": self._cycle is not None, "cycles": self._cycles,
            "last_run_at": self._last.get("finished_at"), "duration_s": self._last.get("duration_s"),
            "services": len(self._named), "registered": len(self._registered),
            "providers": providers,
            "errors": [e for name in sorted(self._errors) for e in self._errors[name]],
            "health": {"healthy": known.count(True), "unhealthy": known.count(False), "unknown": known.count(None)},
            "store": self._store.kind, "watching": len(self._watched()),
        }


def start(settings: Mapping | None, bus: BusClient, on_services: Callable[[ServicesChanged], None],
          **kw) -> pykka.ActorRef:
    """Start the engine (kw: home, project_root, reserved_names, health, is_connected, run_at_start, trust_box,
    store)."""
    return DiscoveryEngine.start(settings, bus, on_services, **kw)
