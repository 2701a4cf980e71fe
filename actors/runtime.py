"""Runtime: starts troupe's actors in order, stops them in reverse, and is the edge API."""
from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any

import gevent
import gevent.event
import pykka
from loguru import logger

from actors.caching import wiring as caching
from actors.ops import trace_wiring
from actors.ops import acts as ops_acts, wiring as ops
from actors.tasks import wiring as task_wiring
from actors.events.bus import BusClient, EventBus
from actors.catalogue.snapshot import Catalogue
from actors.settings import config as config_mod
from actors.settings.config import DEFAULT_TIMEOUT, Config, ServerConfig
from actors.settings.model import START_ON_DEMAND
from actors.messages import ApplyServers, ControlServer, GetStatus
from actors.protocol import mcp, request_state
from actors.supervision.placing import Placement
from actors.supervision.policy import Policy
from actors.catalogue.registry import Registry
from actors.downstream import coretools
from actors.tells import tell as _tell
from actors.upstream.routing import route_server_request
from actors.redact import redact_url
from actors.supervision import client_route
from actors.supervision import memory
from actors.supervision.directory import Directory
from actors.supervision.demand import WakeServer
from actors.supervision.states import ServerState
from actors.messages import SetUrl
from actors.supervision.early_start import EarlyStarts
from actors.supervision.supervisor import Supervisor
from actors.trust import ledger, report as trust_report
from actors.trust.keeper import TrustKeeper
from actors.trust.ledger import TrustSnapshot
from actors.trust.messages import Decide, WatchTrust
from actors.auth import report as auth_report, tokens as auth_tokens
from actors.auth.access import UpstreamAuthAccess, auth_snapshot, split_key
from actors.auth.keeper import AuthKeeper
from actors.auth.messages import CompleteSignIn, SetRedirect, Unauthorized
from actors.transports.factory import make_transport
from actors.ops.history import GetHistory, History, history_listener, history_sample_s
from actors.published import Published
from actors.ratelimit import limiter as rate_limiter
from actors.workflows.service import WorkflowService

ASK_TIMEOUT = 10.0  # edge code never waits longer than this for an actor's answer
STOP_DEADLINE = 4.5
STATS_TIMEOUT = 1.0  # the status report waits this long at most for the connections' counters


class Runtime:
    """One running troupe: the actors plus blocking helpers for edge code (never actors)."""

    def __init__(self, config: Config, *, policy: Policy | None = None, discovery: bool | None = None,
                 home: str | None = None, project_root: str | None = None, early: EarlyStarts | None = None):
        self.config = config
        # The config's stdio servers launched before this module was imported (main.py): each
        # goes to its transport; what none takes is stopped once the start settles.
        self._early = early
        self._early_watch: gevent.Greenlet | None = None
        self.policy = policy or Policy()
        # The published snapshots: readers get the read side; each Publisher waits in _writers
        # until start() hands it to its one owner actor, and nothing here keeps it after that.
        self.box, catalogue = Published.create(Catalogue())  # the Registry's catalogue
        # the Supervisor's snapshot of every server (waitable: a call waits on it for an on-demand start)
        self.servers, directory = Published.create(Directory(), waitable=True)
        self.trust, trust = Published.create(TrustSnapshot())  # the TrustKeeper's approvals and pins
        self.auth, auth = auth_snapshot()  # upstream OAuth: the AuthKeeper publishes bearers here
        self._writers: dict[str, Any] | None = dict(catalogue=catalogue, directory=directory, trust=trust, auth=auth)
        self.settled = gevent.event.Event()
        self.started_at = time.time()
        self._discovery_wanted = discovery
        self._home, self._project_root = home, project_root
        self.bus: BusClient | None = None
        self.registry = self.supervisor = self.discovery = self.health = self.keeper = self.auth_keeper = None
        self.cache: pykka.ActorRef | None = None  # the CacheKeeper (actors/caching)
        self.tasks: pykka.ActorRef | None = None  # the TaskKeeper (actors/tasks)
        self.history: pykka.ActorRef | None = None  # each server's traffic over 15 minutes (actors/ops/history)
        self.task_ids = None  # seals the task ids handed to clients (set with the sealer, below)
        # The config file troupe runs from, for the running record and the hints that name it
        # (actors/trust/running.py): absolute, since `troupe approve` may run from anywhere.
        self.config_file = config_mod.file_of(config)
        self.approvals_path = ledger.path_for(config, home)
        # Seals the requestState of input rounds (MRTR); its key sits beside the approvals file.
        self.tokens_path = auth_tokens.default_path(self.approvals_path)  # oauth-tokens.json beside it
        # The --config approval hints name: only when that config says where the approvals live
        # (a cluster's Redis, trust.approvals_file, discovery.home); else `troupe approve NAME` finds
        # this troupe by its running record beside the file a plain command reads.
        self.approve_config = self.config_file if (config.cluster is not None or self.approvals_path
                                                   != ledger.default_path()) else None
        self.sealer = request_state.load_sealer(config.serve.state_key, os.path.dirname(self.approvals_path))
        # In a cluster, the link to Redis and the instance's heartbeat (started once the URL is known).
        self.cluster = self.shared = None
        if config.cluster is not None:  # the cluster's modules load only for a config with `cluster:`
            from actors.cluster.member import ClusterMember
            from actors.cluster.shared import SharedState
            self.cluster = ClusterMember(config.cluster)
            # approvals, registrations, the requestState key and events are shared in Redis
            self.shared = SharedState(config.cluster)
        if self.shared is not None and not config.serve.state_key:
            self.sealer = request_state.StateSealer(self.shared.state_key)
        self._stopped = False
        self._discovered: dict[str, ServerConfig] = {}  # what discovery currently contributes
        # What upstreams are told troupe can relay: everything, whoever connects (mcp.py says why).
        self.client_caps: dict = mcp.relayed_client_capabilities()
        self.workflows = WorkflowService(config)  # sessions read .current (the WorkflowSet)
        self.tracing = None  # actors.ops.tracing.Tracing once started, when traces are exported
        self.observer = self.audit = None  # the call path's Observer and the audit writer (actors/ops)
        # Rate limits: Sessions check them on each call to a server; a reload gives new ones.
        self.rates = rate_limiter.for_config(config)

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> "Runtime":
        if self.bus is not None:
            return self  # already started
        self.bus = BusClient(EventBus.start())
        self.tracing = trace_wiring.start(self.config.telemetry, self.config.serve.transport)
        self.history = History.start(self.server_totals, history_sample_s())
        self.observer, self.audit = ops.start(self.config, self._instance, (history_listener(self.history),))
        writers, self._writers = self._writers, None
        assert writers is not None  # handed over once, here
        # The keeper loads the approvals before anything could launch, so the gate never guesses.
        self.keeper = TrustKeeper.start(self.approvals_path, writers["trust"], self.bus,
                                        ledger=self.shared.ledger(self.approvals_path) if self.shared else None,
                                        record=True, config_file=self.config_file,
                                        approve_config=self.approve_config)
        # Tokens load before any connection starts: a server signed in before is reached with them.
        self.auth_keeper = AuthKeeper.start(self.tokens_path, writers["auth"], lambda: self.supervisor)
        transports = functools.partial(make_transport, auth=UpstreamAuthAccess(self.auth, self.auth_keeper),
                                       early=self._early)
        self.registry = Registry.start(writers["catalogue"], self.bus, self.config.serve.separator,
                                       trust_box=self.trust, keeper=self.keeper, reserved=coretools.RESERVED_NAMES,
                                       profiles=tuple(self.config.profiles.values()),
                                       approve_config=self.approve_config)
        self.supervisor = Supervisor.start(self.config.servers, self.registry, self.bus, policy=self.policy,
                                           mode=self.config.serve.mode, directory=writers["directory"],
                                           settled=self.settled, client_capabilities=self.client_caps,
                                           transport_factory=transports,
                                           route_server_request=route_server_request, trust_box=self.trust,
                                           placement=Placement(self.cluster is not None,
                                                               self.shared.eras() if self.shared else None),
                                           on_directory=functools.partial(_tell_servers_seen, self.keeper),
                                           approve_config=self.approve_config)
        for ref in (self.registry, self.supervisor):
            self._watch_trust(ref)
        self.cache = caching.start_keeper(self.config, self.bus, self.shared)
        self.task_ids = task_wiring.ids_for(self.config, self.sealer)
        self.tasks = task_wiring.start_keeper(self.config, self.task_ids, self.shared)
        if self._discovery_enabled():
            self._start_discovery()
        self.workflows.start(self.bus)
        if self._early:
            self._early_watch = gevent.spawn(self._discard_early_when_settled)
        return self

    def _discard_early_when_settled(self) -> None:
        early = self._early
        self.settled.wait()  # every server has opened its transport by then (or stop() came first)
        if early is not None:
            early.discard_rest()

    def _discovery_enabled(self) -> bool:
        if self._discovery_wanted is not None:
            return self._discovery_wanted
        return bool(self.config.discovery.get("enabled", False))

    def _start_discovery(self) -> None:
        try:
            from actors.discovery import engine
        except ImportError as exc:
            logger.warning("discovery unavailable: {}", exc)
            return
        supervisor = self.supervisor
        assert supervisor is not None and self.bus is not None and self.keeper is not None  # start() set them
        reserved = frozenset(s.name for s in self.config.servers)
        # discovery.start: on_demand: a server found in a client's config costs no process until used
        on_demand = self.config.discovery.get("start") == START_ON_DEMAND

        def on_services(changed) -> None:
            # Discovery owns its servers' set; the supervisor reconciles that source.
            for cfg in changed.added + changed.updated:
                self._discovered[cfg.name] = dataclasses.replace(cfg, start=START_ON_DEMAND) if on_demand else cfg
            for name in changed.removed:
                self._discovered.pop(name, None)
            if not _tell(supervisor, ApplyServers(tuple(self._discovered.values()), "discovery")):
                logger.debug("discovery: the supervisor has stopped; what discovery found is not applied")

        servers = self.servers

        def is_connected(name: str) -> bool:  # a look at the supervisor's published snapshot
            view = servers.current.get(name)
            # An idle on-demand server counts as connected: it listed when it last ran, and a health
            # probe would start the very process on-demand keeps stopped.
            return view is not None and (view.callable or view.state == ServerState.IDLE)

        self.discovery = engine.start(dict(self.config.discovery), self.bus, on_services,
                                      home=self._home, project_root=self._project_root, reserved_names=reserved,
                                      is_connected=is_connected, trust_box=self.trust,
                                      store=self.shared.store() if self.shared else None)
        self._watch_trust(self.discovery)

    def _watch_trust(self, ref) -> None:
        """`ref` rebuilds what it derives from approvals on each TrustChanged from the keeper."""
        if not _tell(self.keeper, WatchTrust(ref)):
            logger.warning("the trust keeper has stopped: approvals changed now reach no actor")

    def stop(self) -> None:
        """Reverse start order, each stop in parallel where it can be; bounded."""
        if self._stopped:
            return
        self._stopped = True
        deadline = time.monotonic() + STOP_DEADLINE
        if self.cluster is not None:  # first: the others stop routing here and may take its servers
            self.cluster.stop()
        self.workflows.stop()
        if self._early_watch is not None:
            self._early_watch.kill(block=False)
        if self._early is not None:  # normally all taken by now; a leftover must not outlive troupe
            self._early.discard_rest(wait=min(2.5, max(0.1, deadline - time.monotonic())))
        for ref in (self.history, self.discovery, self.tasks,
                    self.supervisor, self.cache, self.auth_keeper, self.registry,
                    self.keeper, self.bus.ref if self.bus else None):
            if ref is None:
                continue
            try:
                ref.stop(timeout=max(0.1, deadline - time.monotonic()))
            except pykka.Timeout:
                logger.warning("actor {} did not stop in time", ref)
            except pykka.ActorDeadError:
                pass
        if self.shared is not None:  # last: the keeper's final flush goes through its link
            self.shared.stop()
        if self.tracing is not None:  # after every actor: their last spans go too
            trace_wiring.stop(self.tracing)
        ops.stop(self.audit)  # after every actor: the calls they ended are written too
        self.rates.close()

    def _instance(self) -> str | None:
        """This troupe's name in its cluster (None alone, or until it knows the URL it serves on)."""
        return self.cluster.config.instance if self.cluster is not None else None

    # ---------------------------------------------------------------- what a Session may use

    def session_context(self):
        """A Session's frozen view of this troupe (actors/downstream/context.py)."""
        from actors.downstream.context import for_runtime
        return for_runtime(self)

    # ---------------------------------------------------------------- reads (no actor hop)

    def catalogue(self) -> Catalogue:
        return self.box.current

    def connection(self, server: str) -> pykka.ActorRef | None:
        view = self.servers.current.get(server)
        return view.ref if view is not None and view.callable else None

    def connection_or_status(self, server: str, client=None, anonymous: bool = False) -> tuple[Any, str]:
        """The live connection, or why there is none (so callers fail at once, naming it). `client`:
        the calling Session's ref; a `share: per_client` server answers with that client's own
        upstream (a ClientRoute while it starts); `anonymous`: a stateless caller naming no client."""
        return client_route.resolve(self.servers.current, self.supervisor, server, client, anonymous)

    def wake(self, server: str, method: str = "") -> None:
        """A call found on-demand `server` idle: the Supervisor starts it (once for every waiter)."""
        if self.supervisor is not None:
            _tell(self.supervisor, WakeServer(server, method))

    def client_left(self, session) -> None:
        """A Session stops: the Supervisor stops its client's own upstreams (share: per_client)."""
        if self.supervisor is not None:
            _tell(self.supervisor, client_route.ClientLeft(session.actor_urn))

    def server_timeout(self, server: str) -> float:
        """The server's per-request timeout (its config's), or the default for an unknown one."""
        view = self.servers.current.get(server)
        return view.config.timeout if view is not None else DEFAULT_TIMEOUT

    def retry_tools(self, server: str) -> bool:
        view = self.servers.current.get(server)
        return view is not None and view.config.retry_idempotent_tools

    def passthrough_server(self) -> str | None:
        """The one server with no prefix, if exactly one: names no tool matches go to it.

        With a single unprefixed backend troupe is a transparent front: the backend
        itself answers for names it does not list (tools it added but has not announced).
        """
        bare = [s.name for s in self.config.servers if s.effective_prefix == ""]
        return bare[0] if len(bare) == 1 else None

    # ---------------------------------------------------------------- sessions and relaying

    def notify_upstreams(self, method: str, params=None) -> None:
        from actors.messages import NotifyUpstream
        for view in self.servers.current.servers.values():
            if view.callable:
                _tell(view.ref, NotifyUpstream(method, params))

    # ---------------------------------------------------------------- cross-session settings

    def set_log_level(self, session, level: str | None) -> None:
        """A session's wish for upstream logs; the Supervisor owns the resulting level."""
        from actors.messages import SetSessionLogLevel
        _tell(self.supervisor, SetSessionLogLevel(session, level))

    # ---------------------------------------------------------------- asks (edge code only)

    def _ask(self, ref, make, timeout: float = ASK_TIMEOUT):
        future = pykka.ThreadingFuture()
        if not _tell(ref, make(future)):  # as pykka's own ask: a stopped actor fails the ask at once
            raise pykka.ActorDeadError(f"{ref} has stopped")
        return future.get(timeout=timeout)

    def status(self) -> dict:
        answer = self._ask(self.supervisor, GetStatus)
        report = answer.to_json()
        auth_report.annotate(report["servers"], self.servers.current, self.auth.current)
        live = self.live_stats()
        for entry in report["servers"]:
            now = live.get(entry["name"])
            if now is not None:  # each connection counts its own calls: ask, never read its object
                entry.update(answer.retired[entry["name"]].plus(now).to_json())
        report["cache"] = caching.cache_status(self.cache)
        report["tasks"] = task_wiring.task_status(self.tasks)
        if self.tracing is not None:
            report["tracing"] = trace_wiring.report(self.tracing)
        report["audit"] = ops.status(self.audit)
        report["rates"] = self.rates.report()
        report["collisions"] = list(self.box.current.collisions)  # names troupe had to change, and why
        memory.annotate(report)  # RSS per running server and of troupe with every child
        if self.discovery is not None:
            from actors.discovery.messages import GetDiscoveryStatus
            try:
                report["discovery"] = self._ask(self.discovery, GetDiscoveryStatus, timeout=3.0)
            except Exception as exc:
                report["discovery"] = {"error": str(exc)}
        if self.cluster is not None:
            report["cluster"] = self.cluster.status()
            instances = report["cluster"].get("instances")
            report["instances"] = instances if isinstance(instances, list) else []
            if self.shared is not None and self.shared.bridge is not None:
                report["cluster"]["events"] = self.shared.bridge.status()  # sent, received, dropped
        return report

    def server_totals(self) -> dict:
        """Every server's call totals now (StatsSnapshot): its retired generations' plus its live
        one's, as /status adds them."""
        answer = self._ask(self.supervisor, GetStatus)
        live = self.live_stats()
        return {name: retired.plus(live[name]) if name in live else retired
                for name, retired in answer.retired.items()}

    def history_report(self) -> dict:
        """The dashboard's charts: each server's traffic over the last 15 minutes, the last failures."""
        if self.history is None:
            return {"sample_s": None, "window_s": None, "servers": {}, "failures": []}
        return self._ask(self.history, GetHistory)

    def live_stats(self, timeout: float = STATS_TIMEOUT) -> dict:
        """Every live connection's StatsSnapshot, asked in parallel; one that does not answer
        in time is left out (its server shows its earlier generations' totals only)."""
        from actors.messages import GetStats
        futures = {}
        for name, view in self.servers.current.servers.items():
            future = pykka.ThreadingFuture()
            if view.ref is not None and _tell(view.ref, GetStats(future)):
                futures[name] = future
        out, deadline = {}, time.monotonic() + timeout
        for name, future in futures.items():
            try:
                out[name] = future.get(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                continue
        return out

    def control(self, action: str, server: str) -> dict:
        return self._ask(self.supervisor, lambda f: ControlServer(action, server, f))

    def apply_servers(self, servers: tuple[ServerConfig, ...], source: str = "config") -> dict:
        return self._ask(self.supervisor, lambda f: ApplyServers(servers, source, f))

    def set_url(self, url: str) -> None:
        assert self.supervisor is not None  # the front learns its URL after start()
        if not _tell(self.supervisor, SetUrl(url)):
            logger.warning("the supervisor has stopped: its status keeps no URL")
        if self.auth_keeper is not None:  # the OAuth redirect comes back to this front
            if not _tell(self.auth_keeper, SetRedirect(url[:-len("/mcp")] if url.endswith("/mcp") else url)):
                logger.warning("the auth keeper has stopped: upstream sign-ins have no redirect")
        if self.cluster is not None:
            self.cluster.start(url, self.supervisor, self.config.serve.auth_token)
        if self.shared is not None and self.cluster is not None and self.bus is not None:
            self.shared.start_bridge(self.bus, self.cluster.config.instance or url)
        if self.cluster is not None:  # its minted tasks go to Redis under this instance's name from now on
            task_wiring.joined(self.tasks, self.cluster.config.instance or url)

    def events(self, limit: int = 100) -> list:
        assert self.bus is not None  # asked by a front or the embedded handle, after start()
        return [e.to_json() for e in self.bus.history(limit)]

    def _discovery_ask(self, make) -> Any:
        if self.discovery is None:
            raise RuntimeError("discovery is not enabled (set discovery.enabled: true)")
        return self._ask(self.discovery, make, timeout=30.0)

    def discovery_run(self):
        from actors.discovery.messages import RunDiscovery
        return _plain(self._discovery_ask(RunDiscovery))

    def register_server(self, entry: dict):
        from actors.discovery.messages import RegisterServer
        return self._discovery_ask(lambda f: RegisterServer(entry, f))

    def unregister_server(self, name: str):
        from actors.discovery.messages import UnregisterServer
        return self._discovery_ask(lambda f: UnregisterServer(name, f))

    def health_check(self, name: str | None = None):
        from actors.discovery.messages import CheckHealth
        return self._discovery_ask(lambda f: CheckHealth(name, f))

    # ---------------------------------------------------------------- trust (operator acts only)

    def decide(self, name: str, decision: str) -> dict:
        """Approve or deny one server by name: covers its exact launch line and, for an
        approval, every withheld tool and prompt definition. Never reachable from MCP."""
        from actors.messages import DescribeLaunch
        facts = self._ask(self.supervisor, lambda f: DescribeLaunch(name, f))
        entry = self._ask(self.keeper, lambda f: Decide(facts.identity, name, decision, facts.provenance,
                                                        facts.shown, f))
        return {"server": name, "decision": decision, "provenance": facts.provenance, "launch": facts.shown,
                "file": facts.file, "pinned": bool(entry.get("pinned"))}

    def approvals(self) -> list[dict]:
        """What waits for an operator: unapproved servers and withheld definitions."""
        return trust_report.waiting(self.status()["servers"], self.trust.current)

    def sign_ins(self) -> list[dict]:
        """Servers waiting for an OAuth sign-in, with their authorization URL (no actor hop)."""
        return auth_report.waiting(self.servers.current, self.auth.current)

    def client_sign_ins(self, client: str, sees) -> list[dict]:
        """The `auth: per_client` servers `client` sees (sees(name)) and has not signed in to, each
        with its own link; asks the AuthKeeper to prepare the links not prepared yet."""
        entries, unprepared = auth_report.client_waiting(self.servers.current, self.auth.current, client, sees)
        for view in unprepared if self.auth_keeper is not None else ():
            _tell(self.auth_keeper, Unauthorized(view.config.name, view.config.http.url, None, None,
                                                 view.config.auth, client))
        return entries

    def complete_sign_in(self, state: str, code: str, iss: str | None = None) -> str:
        """The /oauth/callback: the AuthKeeper exchanges the code; the names of the servers at the
        signed-in URL (and the client, for a client's own sign-in). KeyError for an unknown or used state."""
        assert self.auth_keeper is not None  # the front serves only a started runtime
        key = self._ask(self.auth_keeper, lambda f: CompleteSignIn(state, code, f, iss))
        url, client = split_key(key)
        names = [n for n, v in self.servers.current.servers.items() if v.config.http and v.config.http.url == url]
        shown = ", ".join(sorted(names)) or redact_url(url)
        ops_acts.record(self.observer, "sign-in", shown, client, ops_acts.OAUTH)
        return shown if client is None else f"{shown} as client {client}"

    def wait_settled(self, timeout: float) -> bool:
        return self.settled.wait(timeout=timeout)


def _tell_servers_seen(keeper, directory) -> None:
    from actors.trust.messages import ServersSeen
    _tell(keeper, ServersSeen(directory))


def _plain(value):
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "__dataclass_fields__"):
        import dataclasses
        return dataclasses.asdict(value)
    return value
