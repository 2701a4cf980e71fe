"""Supervision policy as data (OTP/Akka style): ChildSpec, Policy and the backoff rule."""
from __future__ import annotations

import random
from dataclasses import dataclass, replace

from actors.settings.model import ServerConfig

HUNG_AFTER_TIMEOUTS = 3  # requests timed out in a row before a ping decides whether a server is hung


@dataclass(frozen=True, slots=True)
class Policy:
    """More than `intensity` failures within `period` seconds opens the circuit.

    Backoff doubles from min_backoff to max_backoff with ±jitter; a server that
    stayed up `reset_after` seconds starts again from min_backoff; an open
    circuit is retried after `cooldown` seconds (or by a manual restart). A server whose
    requests time out `hung_after` times in a row and that then fails a ping is restarted
    (0: never).
    """

    intensity: int = 5
    period: float = 60.0
    min_backoff: float = 0.5
    max_backoff: float = 30.0
    jitter: float = 0.2
    reset_after: float = 60.0
    cooldown: float = 300.0
    hung_after: int = HUNG_AFTER_TIMEOUTS

    def backoff(self, attempt: int, rng: random.Random = random._inst) -> float:
        """Delay before restart number `attempt` (1-based)."""
        base = min(self.max_backoff, self.min_backoff * (2 ** max(0, attempt - 1)))
        return max(0.0, base * (1 + rng.uniform(-self.jitter, self.jitter)))

    def overridden(self, server: ServerConfig) -> "Policy":
        spec = server.policy
        changes = {k: getattr(spec, k) for k in ("intensity", "period", "min_backoff", "max_backoff",
                                                           "hung_after")
                   if getattr(spec, k) is not None}
        return replace(self, **changes) if changes else self


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """One supervised connection: what to start. Every connection is permanent: it is
    restarted after any exit until its circuit opens (stopping it is an operator act)."""

    id: str
    config: ServerConfig
