"""The Supervisor's private record of one server (Child), and the ServerView it publishes of it."""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field, replace

import gevent
import pykka

from actors.settings.model import ServerConfig
from actors.supervision.directory import ServerView
from actors.supervision.policy import ChildSpec, Policy
from actors.supervision.states import CALLABLE_STATES, ServerState
from actors.trust.provenance import identity_key as trust_identity
from actors.upstream.stats import StatsSnapshot


@dataclass
class Child:
    """The Supervisor's own record of one server; no one else reads it (they read its ServerView).

    Mutable, and touched only inside the Supervisor's actor: its state, the generation of its
    live connection, the failures that drive the backoff ladder and the circuit, its restart timer.
    """

    spec: ChildSpec
    policy: Policy
    retired: StatsSnapshot = field(default_factory=StatsSnapshot)  # totals of its ended generations
    retired_upto: int = 0  # the newest generation whose totals are in `retired`
    state: ServerState = ServerState.STOPPED
    since: float = field(default_factory=time.time)
    reason: str = ""
    ref: pykka.ActorRef | None = None
    generation: int = 0
    restarts: int = 0
    failures: deque = field(default_factory=deque)
    ready_at: float | None = None
    timer: gevent.Greenlet | None = None
    timer_id: int = 0
    counts: tuple = (0, 0, 0)
    server_info: dict | None = None
    endpoint: dict | None = None
    settled: bool = False  # its first start attempt has ended (ready or failed)
    signed_in: bool = False  # a SignedIn came before its needs-auth failure: start it again at once
    era: tuple | None = None  # (server identity, "modern" | "legacy") as its last probe showed
    # Servers on demand (on_demand.py): starts a first use caused, when the last was, and whether
    # the running start is the one that learns a never-listed server's lists (not a wake).
    wakes: int = 0
    last_wake: float | None = None
    learning: bool = False

    def known_era(self, identity: str | None = None) -> str | None:
        """The protocol era remembered for this server's current identity (`identity`, when the
        caller has read it already), or None (probe it): an edited launch line or URL is another
        server, probed again."""
        if self.era is None or self.era[0] != (identity if identity is not None else trust_identity(self.config)):
            return None
        return self.era[1]

    @property
    def config(self) -> ServerConfig:
        return self.spec.config

    @property
    def callable(self) -> bool:
        return self.state in CALLABLE_STATES and self.ref is not None

    def view(self, front=None, held: bool = False) -> ServerView:
        """What the Directory shows of it: frozen, so readers never see this record change (with
        its failover front in a cluster, and whether that front holds its calls now)."""
        return ServerView(self.config.name, self.config, self.state, self.reason, self.ref, self.generation,
                          self.settled, self.counts, front, held)

    def set_enabled(self, enabled: bool) -> None:
        """An operator's enable or disable: its config says so from now on (until a reload)."""
        self.spec = replace(self.spec, config=replace(self.config, enabled=enabled))

    def retire(self, generation: int, stats: StatsSnapshot) -> None:
        """Add an ended generation's totals, once: a late or repeated report is ignored."""
        if generation > self.retired_upto:
            self.retired, self.retired_upto = self.retired.plus(stats), generation

    def note_failure(self, now: float) -> int:
        """Record a failure; how many fall within the policy's period (more than intensity opens the circuit)."""
        if self.ready_at and now - self.ready_at >= self.policy.reset_after:
            self.failures.clear()  # it ran long enough: start the backoff ladder again
        self.ready_at = None
        self.failures.append(now)
        while self.failures and now - self.failures[0] > self.policy.period:
            self.failures.popleft()
        return len(self.failures)

    def cancel_timer(self) -> None:
        if self.timer is not None:
            self.timer.kill(block=False)
            self.timer = None
