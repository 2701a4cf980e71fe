"""The Supervisor's book of failover fronts: one FailoverFront per `single` server of a cluster,
started with the server's record and stopped with it, told where its calls go after every change."""
from __future__ import annotations

import pykka
from loguru import logger

from actors.cluster.failover import FailoverFront, FrontTarget
from actors.supervision.states import CALLABLE_STATES, ServerState
from actors.tells import tell


def front_target(child, relay: bool, owner: str | None) -> FrontTarget:
    """Where `child`'s calls go now: its ready Connection; held while it starts (a new owner, a
    relay to one, or its lease not yet placed: the lease is moving); else answered with why."""
    config = child.config
    if child.state in CALLABLE_STATES and child.ref is not None:
        return FrontTarget(child.ref, False, "", relay, owner, config.timeout)
    reason = f"server {config.name} is {child.state}" + (f": {child.reason}" if child.reason else "")
    return FrontTarget(None, child.state == ServerState.STARTING, reason, relay, owner, config.timeout)


class Fronts:
    """Owned by the Supervisor (only its greenlet calls it): the front of each `single` server
    and the FrontTarget it was last told, so it hears only changes."""

    def __init__(self) -> None:
        self._refs: dict[str, pykka.ActorRef] = {}
        self._told: dict[str, FrontTarget] = {}

    def sync(self, children, placement, relays) -> dict[str, tuple[pykka.ActorRef, bool]]:
        """Start, tell and stop fronts to match `children`; name → (front, calls are held)."""
        out = {}
        for name, child in children.items():
            if not placement.single(child):
                continue
            ref = self._refs.get(name)
            if ref is None:
                ref = self._refs[name] = FailoverFront.start(name)
            target = front_target(child, name in relays, placement.owner(name))
            if self._told.get(name) != target:
                self._told[name] = target
                if not tell(ref, target):
                    logger.warning("failover front of {} is gone", name)
            out[name] = (ref, target.hold)
        for name in [n for n in self._refs if n not in out]:
            self._stop(name)
        return out

    def stop_all(self) -> None:
        for name in list(self._refs):
            self._stop(name)

    def _stop(self, name: str) -> None:
        self._told.pop(name, None)
        ref = self._refs.pop(name)
        try:
            ref.stop(block=False)  # it answers the calls it holds as it goes
        except pykka.ActorDeadError:
            pass
