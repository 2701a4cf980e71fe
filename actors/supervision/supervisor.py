"""Supervisor actor: starts one Connection per server, restarts with backoff, reports status."""
from __future__ import annotations

import time
from types import MappingProxyType

import gevent
import gevent.event
import pykka
from loguru import logger

from actors.events.bus import BusClient
from actors.cluster.fronts import Fronts
from actors.cluster.leases import JoinedCluster, LeaseChanged, WantLeases
from actors.events.kinds import (ApprovalAwaited, CircuitOpened, ServerConnected, ServerDisconnected, ServerRestarted,
                                 ServerStateChanged, StartupSettled)
from actors.messages import (ApplyServers, ConnectionCounts, ConnectionDegraded, ConnectionFailed, ConnectionReady,
                             ConnectionRetired, ControlServer, DescribeLaunch, DropServer, EraLearned, GetStatus,
                             RestartDue, SetSessionLogLevel, SetUrl, StatusReport)
from actors.protocol.modern_client import MODERN
from actors.settings.model import ServerConfig
from actors.supervision.child import Child
from actors.supervision.per_client import ClientUpstreams, OwnerBus, OwnedRoute
from actors.supervision.directory import Directory
from actors.supervision.log_levels import LogLevels
from actors.supervision.on_demand import OnDemand
from actors.supervision.placing import Placement
from actors.supervision.policy import ChildSpec, Policy
from actors.supervision.report import launch_facts, server_status, status_report
from actors.supervision.states import CALLABLE_STATES, GATED_STATES, ServerState
from actors.supervision.signin import SignedIn, SignInGate, SignInRequired
from actors.tells import fail as _fail, tell as _tell
from actors.trust import provenance as trust
from actors.published import Published, Publisher
from actors.trust.ledger import TrustSnapshot
from actors.trust.messages import TrustChanged
from actors.upstream.connection import Connection, make_transport

STOP_TIMEOUT = 4.5  # all connections stop in parallel within this (shutdown must end within 5 s)
# What Connections tell as they come up and serve: many at once when many servers start. The
# Directory they change is published once their burst in the mailbox is read (_PublishDue), not
# after each: a Directory holds a view of every server, so 50 servers starting made ~200 of them,
# 10,000 views. Every other message (an operator's, an ask) still publishes before it is answered.
BURST_MESSAGES = (ConnectionReady, ConnectionCounts, EraLearned, ConnectionRetired, ConnectionDegraded)


class _PublishDue:
    """Told by the Supervisor to itself after a burst message: publish the Directory now, once
    for all that came before it."""


class Supervisor(OnDemand, SignInGate, LogLevels, pykka.ThreadingActor):
    """Owns one Child record per server and every Connection actor.

    Receives Connection{Ready,Failed,Counts,Degraded}, RestartDue (its own timers), GetStatus (reply:
    StatusReport), ControlServer (reply: the server's status dict), ApplyServers (reply: added/removed/
    changed), SetUrl, TrustChanged, DescribeLaunch (reply: LaunchFacts), SetSessionLogLevel, SignedIn and
    SignInRequired (OAuth, from the AuthKeeper: signin.py), and in a cluster JoinedCluster and LeaseChanged (a `single`
    server runs here only with its lease; elsewhere its Connection relays to the owner; see placing.py).
    For a `share: per_client` server it also owns each client's own Connection (per_client.py):
    receives ForClient (a call for one), ClientLeft (a Session stopped), ClientRestartDue and SweepClients.
    For a `start: on_demand` server (on_demand.py) it receives WakeServer (a Session's first use),
    ConnectionIdle and ConnectionIdled (its Connection, told StopIdle in between) and LearnDone.
    Sends WantLeases to the lease keeper. Starts, restarts (with backoff) and stops connections, opens the
    circuit on a crash loop, and after every change publishes an immutable Directory (it alone holds
    the Publisher): sessions, metrics, the dashboard, reload and embedding read that, never Child. Sends SetLogLevel to
    connections, DropServer to the Registry, and ServerStateChanged, ServerConnected, ServerDisconnected,
    ServerRestarted, CircuitOpened, StartupSettled and ApprovalAwaited to the bus.
    """

    def __init__(self, servers, registry: pykka.ActorRef, bus: BusClient, *, policy: Policy = Policy(),
                 mode: str = "meta", transport_factory=make_transport, client_capabilities=None,
                 directory: Publisher[Directory] | None = None, settled: gevent.event.Event | None = None,
                 route_server_request=None, trust_box: Published[TrustSnapshot] | None = None, placement=None,
                 on_directory=None, approve_config: str | None = None) -> None:
        super().__init__()
        self._approve_config = approve_config  # the --config its approval hints name (trust.approve_hint)
        self._on_directory = on_directory  # told each new Directory (only a tell: the TrustKeeper's record)
        # Read-only: the TrustKeeper owns it and tells us TrustChanged when it is replaced.
        self.trust = trust_box or Published.constant(TrustSnapshot())
        self.registry, self.bus, self.policy, self.mode = registry, bus, policy, mode
        # What upstreams are told troupe can relay, and who their requests for a client go to.
        self.transport_factory, self.client_capabilities = transport_factory, client_capabilities
        self.route_server_request = route_server_request
        self.children: dict[str, Child] = {}  # ours alone; others read self.directory.current
        self.directory = directory if directory is not None else Published.create(Directory())[1]
        self.started_at, self.url = time.time(), None
        self.settled = settled if settled is not None else gevent.event.Event()
        self._initial = tuple(servers)
        self._log_levels: dict = {}  # session → the level it asked for
        self.log_level: str | None = None  # upstreams log at the most verbose level any session asked for
        self.placement = placement or Placement(clustered=False)  # where each server runs, in a cluster
        self._keeper: pykka.ActorRef | None = None  # the lease keeper, once the cluster is joined
        self._relays: set[str] = set()  # servers whose live Connection relays to their owner
        self.clients = ClientUpstreams(self.actor_ref, self._connect_for_client)  # share: per_client upstreams
        self.fronts = Fronts()  # in a cluster, the calls to each `single` server go through its front
        self._publish_told = False  # a _PublishDue is in the mailbox (BURST_MESSAGES)

    # ---------------------------------------------------------------- lifecycle

    def on_start(self) -> None:
        for config in self._initial:
            self._add(config)
        self._check_settled()
        self._publish()

    def on_stop(self) -> None:
        self.fronts.stop_all()
        futures = self.clients.stop_all()
        for child in reversed(list(self.children.values())):  # reverse of start order
            child.cancel_timer()
            if child.ref is not None:
                futures.append(child.ref.stop(block=False))
                child.ref = None
        if futures:
            try:
                pykka.get_all(futures, timeout=STOP_TIMEOUT)
            except Exception as exc:  # a stuck connection must not stop the rest from going
                logger.warning("some connections did not stop in {}s: {}", STOP_TIMEOUT, exc)

    # ---------------------------------------------------------------- dispatch

    def on_receive(self, message):
        if isinstance(message, _PublishDue):
            self._publish_told = False
            self._publish()
            return
        self._dispatch(message)
        if isinstance(message, BURST_MESSAGES):
            self._publish_soon()
        elif not isinstance(message, (GetStatus, DescribeLaunch)) or self._publish_told:
            self._publish()  # a status read after a burst sees it published, as it did before

    def _publish_soon(self) -> None:
        if not self._publish_told:
            self._publish_told = _tell(self.actor_ref, _PublishDue())
            if not self._publish_told:  # stopping: nobody reads it after, but keep the record exact
                self._publish()

    def _publish(self) -> None:
        """A new Directory after each change: readers never see a Child record."""
        fronts = self.fronts.sync(self.children, self.placement, self._relays) if self.placement.clustered else {}
        views = {name: c.view(*fronts.get(name, (None, False))) for name, c in self.children.items()}
        clients, now = self.clients.views(), self.directory.current
        if views != dict(now.servers) or clients != now.clients:
            self.directory.publish(Directory(now.version + 1, MappingProxyType(views), clients))
            if self._on_directory is not None:
                self._on_directory(self.directory.current)

    def _dispatch(self, message) -> None:
        if self.clients.receive(message, self.children.get, lambda child: self._verdict(child) == trust.ALLOWED):
            return  # a client's own upstream's (share: per_client)
        if self._on_demand_message(message):
            return
        match message:
            case SetSessionLogLevel(session=session, level=level):
                self._session_log_level(session, level)
            case ConnectionRetired(server=name, generation=gen, stats=stats):
                child = self.children.get(name)
                if child is not None:
                    child.retire(gen, stats)
            case EraLearned(server=name, generation=gen, era=era) if self._current(name, gen) \
                    and name not in self._relays:  # a relay's era is the owner's front, not the server's
                self.placement.learned(self.children[name], era)
            case ConnectionReady():
                self._on_ready(message)
            case ConnectionFailed():
                self._on_failed(message)
            case SignedIn(url=url):
                self._signed_in(url)
            case SignInRequired(url=url):
                self._sign_in_required(url)
            case ConnectionCounts(server=name, generation=gen):
                child = self._current(name, gen)
                if child:
                    child.counts = (message.tools, message.resources, message.prompts)
            case ConnectionDegraded(server=name, generation=gen, ok=ok, reason=reason):
                child = self._current(name, gen)
                if child and child.state in CALLABLE_STATES:
                    self._set_state(child, ServerState.READY if ok else ServerState.DEGRADED, reason)
            case RestartDue(server=name, attempt_id=attempt):
                child = self.children.get(name)
                if child and child.timer_id == attempt and child.state in (ServerState.BACKOFF, ServerState.FAILED):
                    child.timer = None
                    self._spawn(child)
            case GetStatus(reply=reply):
                reply.set(self.status())
            case ControlServer():
                self._control(message)
            case ApplyServers():
                self._apply(message)
            case SetUrl(url=url):
                self.url = url
            case JoinedCluster(keeper=keeper, token=token, auth_token=auth_token):
                self._keeper, self.placement.token, self.placement.auth_token = keeper, token, auth_token
                self._want_leases()
            case LeaseChanged(server=name) if self.placement.update(message) and name in self.children:
                child = self.children[name]
                if child.state not in GATED_STATES and child.config.enabled and child.config.auto_start:
                    self._stop_child(child, "moved to " + (message.owner or "no instance yet"))
                    child.failures.clear()  # a relay to a dead owner failing says nothing of the new place
                    self._spawn(child)
            case TrustChanged():
                self._trust_changed()
            case DescribeLaunch(server=name, reply=reply):
                child = self.children.get(name)
                if child is None:
                    _fail(reply, KeyError(f"unknown server {name!r}"))
                else:
                    reply.set(launch_facts(child, self._verdict(child)))
            case _:
                logger.warning("supervisor: unknown message {!r}", message)

    # ---------------------------------------------------------------- children

    def _add(self, config: ServerConfig) -> Child:
        child = Child(ChildSpec(config.name, config), self.policy.overridden(config))
        self.children[config.name] = child
        if self._verdict(child) != trust.ALLOWED:
            self._gate(child)
        elif not config.enabled:
            child.reason, child.settled = (f"disabled in {config.origin_file}" if config.source.startswith("discovery")
                                           and config.origin_file else "disabled in config"), True
        elif not config.auto_start:
            child.reason, child.settled = "auto_start is off", True
        elif config.on_demand:
            self._start_on_demand(child)
        else:
            self._spawn(child)
        return child

    def _verdict(self, child: Child) -> str:
        return trust.verdict(child.config, self.trust.current.decisions)

    def _gate(self, child: Child) -> bool:
        """The one place a launch is decided: nothing unapproved is ever executed."""
        verdict = self._verdict(child)
        if verdict == trust.ALLOWED:
            return True
        child.cancel_timer()
        child.settled = True
        if verdict == trust.DENIED:
            self._set_state(child, ServerState.DENIED, "denied by the operator" if child.config.preapproved is not False
                            else "denied in the client's own settings")
        elif verdict == trust.NEEDS_INPUT:
            # names of variables only (as written in the file), never a value
            self._set_state(child, ServerState.NEEDS_INPUT,
                            f"needs {', '.join(child.config.needs_input)}: troupe cannot prompt; set it in "
                            f"troupe's environment or write the value in {child.config.origin_file or 'its file'}")
        else:
            if child.state != ServerState.PENDING_APPROVAL:
                self.bus.publish(ApprovalAwaited(child.config.name, child.config.provenance,
                                                 child.config.origin_file or ""))
            command = trust.approve_hint(child.config.name, self._approve_config)
            self._set_state(child, ServerState.PENDING_APPROVAL, f"{child.config.provenance} server; run `{command}`")
        return False

    def _trust_changed(self) -> None:
        """Start what was just approved; stop what was just denied."""
        for child in list(self.children.values()):
            verdict = self._verdict(child)
            if child.state in GATED_STATES and verdict == trust.ALLOWED:
                self._set_state(child, ServerState.STOPPED, "approved")
                if child.config.enabled and child.config.auto_start:
                    (self._start_on_demand if child.config.on_demand else self._spawn)(child)
            elif verdict != trust.ALLOWED and child.state not in GATED_STATES:
                self._stop_child(child, "approval withdrawn")
                self._gate(child)
            elif verdict != trust.ALLOWED and child.state != verdict:  # a waiting server denied, or back
                self._gate(child)
        self._check_settled()

    def _want_leases(self) -> None:
        if self._keeper is not None:
            _tell(self._keeper, WantLeases(tuple(n for n, c in self.children.items() if self.placement.single(c))))

    def _spawn(self, child: Child) -> None:
        if not self._gate(child):
            return
        config = self.placement.launch_config(child.config)
        if config is None:  # a `single` server whose owner is not known yet: the lease keeper will say
            self._set_state(child, ServerState.STARTING, "waiting for its lease in the cluster")
            return
        relay = config is not child.config
        (self._relays.add if relay else self._relays.discard)(child.config.name)
        child.generation += 1
        self._set_state(child, ServerState.STARTING, f"relaying to {self.placement.owner(child.config.name)}"
                        if relay else "connecting")
        child.ref = self._connect(config, child, MODERN if relay else self.placement.era(child),
                                  self.route_server_request, self.registry, self.bus)

    def _connect(self, config: ServerConfig, child: Child, era, route, registry, bus) -> pykka.ActorRef:
        return Connection.start(config, child.generation, self.actor_ref, registry,
                                transport_factory=self.transport_factory, client_capabilities=self.client_capabilities,
                                bus=bus, route_server_request=route, log_level=self.log_level,
                                hung_after=child.policy.hung_after, era=era)

    def _connect_for_client(self, child: Child, owner) -> pykka.ActorRef:
        """A client's own upstream: here even in a cluster (its client is here), listing nothing into
        the catalogue; every request, log line and resource update it sends goes to its one client."""
        route = OwnedRoute(self.route_server_request, owner) if self.route_server_request is not None else None
        return self._connect(child.config, child, self.placement.era(self.children[child.config.name]), route, None,
                             OwnerBus(owner))

    def _stop_child(self, child: Child, reason: str, state: ServerState = ServerState.STOPPED,
                    forget: bool = False) -> None:
        """Stop its connection; `forget` also takes its tools out of the catalogue (removal)."""
        child.cancel_timer()
        if child.ref is not None:
            child.ref.stop(block=False)
            child.ref = None
        self.clients.server_stopped(child.config.name, reason)
        if forget:
            if not _tell(self.registry, DropServer(child.config.name)):
                logger.warning("{}: the registry has stopped; its tools stay in the last catalogue", child.config.name)
        self._set_state(child, state, reason)

    def _current(self, name: str, generation: int) -> Child | None:
        child = self.children.get(name)
        return child if child is not None and child.generation == generation and child.ref is not None else None

    def _on_ready(self, msg: ConnectionReady) -> None:
        child = self._current(msg.server, msg.generation)
        if child is None:
            return
        child.counts = (msg.tools, msg.resources, msg.prompts)
        child.server_info, child.endpoint = msg.server_info, msg.endpoint
        child.ready_at = time.time()
        child.settled = True
        self._set_state(child, ServerState.READY, "")
        self.bus.publish(ServerConnected(child.config.name, tools=msg.tools))
        self._ready_on_demand(child)
        self._check_settled()

    def _on_failed(self, msg: ConnectionFailed) -> None:
        child = self._current(msg.server, msg.generation)
        if child is None or self._needs_auth(child, msg.reason):  # a 401: no backoff, no circuit
            return
        now = time.time()
        was_up = child.state in CALLABLE_STATES
        assert child.ref is not None  # _current returns only a child with a live ref
        child.ref.stop(block=False)
        child.ref = None
        # Its tools stay listed: a call while it restarts gets an error naming it and its
        # state (the model can act on that), and clients see no list churn on restarts.
        if was_up:
            self.bus.publish(ServerDisconnected(child.config.name, msg.reason))
        failures = child.note_failure(now)
        child.settled = True
        if failures > child.policy.intensity:
            self._set_state(child, ServerState.FAILED, f"circuit open after {failures} failures in "
                                           f"{child.policy.period:g}s; last: {msg.reason}")
            self.bus.publish(CircuitOpened(child.config.name, failures, msg.reason))
            self._schedule(child, child.policy.cooldown)
        else:
            delay = child.policy.backoff(failures)
            self._set_state(child, ServerState.BACKOFF, f"{msg.reason}; restarting in {delay:.2f}s")
            child.restarts += 1
            self.bus.publish(ServerRestarted(child.config.name, child.restarts, round(delay, 3)))
            self._schedule(child, delay)
        self._check_settled()

    def _schedule(self, child: Child, delay: float) -> None:
        child.cancel_timer()
        child.timer_id += 1
        child.timer = gevent.spawn_later(delay, _tell, self.actor_ref, RestartDue(child.config.name, child.timer_id))

    def _set_state(self, child: Child, state: ServerState, reason: str) -> None:
        old = child.state
        if old == state and child.reason == reason:
            return
        child.state, child.reason = state, reason
        if old != state:
            child.since = time.time()
            logger.bind(server=child.config.name).info("{} → {}{}", old, state, f" ({reason})" if reason else "")
        self.bus.publish(ServerStateChanged(child.config.name, old, state, reason))

    def _check_settled(self) -> None:
        if not self.settled.is_set() and all(c.settled for c in self.children.values()):
            self._publish()  # who waits for it reads the Directory next: it must show them settled
            self.settled.set()
            self.bus.publish(StartupSettled())

    # ---------------------------------------------------------------- control

    def _control(self, msg: ControlServer) -> None:
        child = self.children.get(msg.server)
        if child is None:
            _fail(msg.reply, KeyError(f"unknown server {msg.server!r}"))
            return
        action = msg.action
        if action in ("restart", "start", "enable") and self._verdict(child) != trust.ALLOWED:
            _fail(msg.reply, PermissionError(f"{msg.server} is {self._verdict(child)}: only an operator can "
                                             f"approve it (`{trust.approve_hint(msg.server, self._approve_config)}`)"))
            return
        if action in ("restart", "start", "enable"):
            if action == "enable" or not child.config.enabled:
                child.set_enabled(True)
            self._stop_child(child, f"{action} requested", ServerState.STOPPED)
            child.failures.clear()
            if action == "restart":
                child.restarts += 1
            self._spawn(child)
        elif action in ("stop", "disable"):
            if action == "disable":
                child.set_enabled(False)
            self._stop_child(child, f"{action} requested")
        else:
            _fail(msg.reply, ValueError(f"unknown action {action!r}"))
            return
        msg.reply.set(server_status(child))

    def _apply(self, msg: ApplyServers) -> None:
        """Reconcile: start new, stop removed (of this source), restart changed; keep the rest."""
        wanted = {s.name: s for s in msg.servers}
        added, removed, changed = [], [], []
        for name, child in list(self.children.items()):
            # "discovery" owns every "discovery:<provider>" server: an edit or removal reaches them
            if child.config.source.split(":", 1)[0] != msg.source:
                continue
            if name not in wanted:
                self._stop_child(child, "removed from " + msg.source, forget=True)
                del self.children[name]
                removed.append(name)
            elif wanted[name] != child.config:
                self._stop_child(child, "config changed")
                del self.children[name]
                self._add(wanted[name])
                changed.append(name)
        for name, config in wanted.items():
            if name not in self.children:
                self._add(config)
                added.append(name)
        self._check_settled()
        self._want_leases()
        if msg.reply is not None:
            msg.reply.set({"added": added, "removed": removed, "changed": changed})

    # ---------------------------------------------------------------- status

    def status(self) -> StatusReport:
        return status_report(self.children.values(), started_at=self.started_at, url=self.url, mode=self.mode,
                             per_client=self.clients.summary)
