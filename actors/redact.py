"""Launch lines and URLs fit to show (placeholder until the full module lands)."""
from __future__ import annotations

from .discovery.identity import redact_url  # noqa: F401


def redact_args(args):
    return [str(a) for a in args]
