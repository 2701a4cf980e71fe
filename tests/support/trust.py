"""Trust helpers for tests about something else (health, discovery): everything approved."""
from __future__ import annotations

from actors.published import Published
from actors.trust.ledger import TrustSnapshot


class _EveryIdentity(dict):
    """A decisions mapping that approves whatever it is asked about."""

    def get(self, key, default=None):
        return "approved"


def approve_all() -> Published[TrustSnapshot]:
    return Published.constant(TrustSnapshot(decisions=_EveryIdentity()))
