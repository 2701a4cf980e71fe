"""The Supervisor's side of servers on demand (`start: on_demand`): an idle server's kept lists
go to the Registry at troupe's start, a first use wakes it (one start for every call that waits),
an idle Connection is stopped once it confirms nothing came in, and a server never listed is
started once to learn its lists. A mixin of the Supervisor actor: its methods run in its greenlet
and touch only its Child records; the Session that waits for a wake owns that wait's deadline.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import gevent
import orjson
from loguru import logger

from actors.events.kinds import ServerIdled, ServerWoken
from actors.messages import PublishServer
from actors.supervision.child import Child
from actors.supervision.demand import ConnectionIdle, ConnectionIdled, LearnDone, StopIdle, WakeServer
from actors.supervision.states import CALLABLE_STATES, ServerState
from actors.tells import tell
from actors.trust.provenance import identity_key

# After the start that learned a never-listed server's lists, it runs this much longer: a server
# that adds tools once it has seen troupe's capabilities (a list_changed right after `initialized`)
# lists them before it stops, so they are pinned with the rest rather than withheld at its next wake.
LEARN_LINGER = 1.0
IDLE_REASON = "on demand: not running; its pinned lists are served and its first use starts it"


class OnDemand:
    """Mixed into the Supervisor (see the module's docstring)."""

    children: dict[str, Child]
    bus: Any
    registry: Any
    trust: Any
    clients: Any
    actor_ref: Any
    _spawn: Callable[[Child], None]
    _set_state: Callable[[Child, ServerState, str], None]
    _current: Callable[[str, int], Child | None]

    def _on_demand_message(self, message) -> bool:
        """Handle one of the on-demand messages (True), else leave it to the Supervisor."""
        match message:
            case WakeServer(server=name, method=method):
                self._wake(name, method)
            case ConnectionIdle(server=name, generation=gen, activity=activity):
                child = self._current(name, gen)
                if child is not None and child.callable and not self._attached(name):
                    tell(child.ref, StopIdle(gen, activity))
            case LearnDone(server=name, generation=gen):
                child = self._current(name, gen)
                if child is not None and child.learning:
                    child.learning = False
                    # A call during the linger (StopIdle refused) or a client's own upstream attached
                    # keeps it: from then on it idles as usual.
                    if child.callable and not self._attached(name):
                        tell(child.ref, StopIdle(gen, 0, learned=True))
            case ConnectionIdled(server=name, generation=gen, idle_s=idle_s, learned=learned):
                child = self._current(name, gen)
                if child is not None:
                    self._idled(child, idle_s, learned)
            case _:
                return False
        return True

    def _attached(self, server: str) -> bool:
        """A client's own upstream of it (share: per_client) is attached: it stays up."""
        return bool(self.clients.summary(server)["count"])

    def _start_on_demand(self, child: Child) -> None:
        """An allowed on-demand server at troupe's start (or after a reload or an approval): its kept
        lists are served and it waits idle; one never listed is started once to learn them."""
        kept = self.trust.current.listings.get(identity_key(child.config))
        if kept is None:
            child.learning = True
            self._spawn(child)
            return
        lists = orjson.loads(kept)
        counts = tuple(len(lists.get(k) or ()) for k in ("tools", "resources", "prompts"))
        config = child.config
        if not tell(self.registry, PublishServer(
                config.name, config.effective_prefix, tuple(lists.get("tools") or ()),
                tuple(lists.get("resources") or ()), tuple(lists.get("templates") or ()),
                tuple(lists.get("prompts") or ()), lists.get("capabilities"), identity_key(config), config.pin,
                lists.get("instructions") or "")):
            logger.warning("{}: the registry has stopped; its kept lists are not served", config.name)
        child.counts, child.settled = counts, True
        self._set_state(child, ServerState.IDLE, IDLE_REASON)

    def _wake(self, name: str, method: str) -> None:
        """A first use: start an idle server (a server already starting is shared by every waiter;
        one in backoff or with its circuit open starts when its policy says, as a permanent one)."""
        child = self.children.get(name)
        if child is None or child.state != ServerState.IDLE or not child.config.on_demand:
            return
        child.wakes += 1
        child.last_wake = time.time()
        self.bus.publish(ServerWoken(name, child.wakes, method))
        self._spawn(child)

    def _ready_on_demand(self, child: Child) -> None:
        """A ready on-demand server: the start that learned its lists stops after LEARN_LINGER."""
        if child.learning:
            gevent.spawn_later(LEARN_LINGER, tell, self.actor_ref, LearnDone(child.config.name, child.generation))

    def _idled(self, child: Child, idle_s: float, learned: bool) -> None:
        """The Connection agreed to stop: it takes no more calls (each is answered unsent and waits
        for the next start); its lists stay in the catalogue."""
        if child.state not in CALLABLE_STATES or child.ref is None:
            return
        child.ref.stop(block=False)
        child.ref = None
        child.endpoint = None
        self._set_state(child, ServerState.IDLE, IDLE_REASON if learned else
                        f"stopped after {idle_s:.1f}s idle; its lists are served and its next use starts it")
        self.bus.publish(ServerIdled(child.config.name, round(idle_s, 3), learned))
