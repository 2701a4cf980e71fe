"""Every state a supervised server can be in, in one enum.

A `str` Enum: a member equals its plain string ("ready"), hashes like it and is written the
same by orjson and json, so the status report, the events and the dashboard see exactly the
strings they always saw, and code that still compares with plain strings keeps working.
"""
from __future__ import annotations

from enum import Enum


class ServerState(str, Enum):
    """The state of one server as the Supervisor keeps it (Child.state, ServerView.state,
    the "state" of a status report entry, ServerStateChanged.old/new)."""

    STARTING = "starting"  # a Connection is spawned and doing its handshake
    READY = "ready"  # connected and listed: calls go through
    DEGRADED = "degraded"  # connected, but requests time out in a row: calls still go to it
    BACKOFF = "backoff"  # it failed; a restart is scheduled after the backoff delay
    FAILED = "failed"  # the circuit is open: too many failures in the period; retried after a cooldown
    STOPPED = "stopped"  # not running: disabled, auto_start off, or stopped by an operator
    IDLE = "idle"  # an on-demand server not running: its pinned lists are served; first use starts it
    PENDING_APPROVAL = "pending-approval"  # never executed until an operator approves (trust.PENDING)
    DENIED = "denied"  # the operator or the client's own settings said no (trust.DENIED)
    NEEDS_INPUT = "needs-input"  # its client file has a variable nobody can fill (trust.NEEDS_INPUT)
    NEEDS_AUTH = "needs-auth"  # an HTTP server answered 401: waits for an OAuth sign-in (actors/auth), no restarts

    # Python 3.11 made format() of a mixed-in Enum print "ServerState.READY": log lines and
    # reasons built with f-strings must keep showing the bare value, on 3.10 too.
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


# The launch gate holds a server in these states: nothing of it has run.
GATED_STATES = (ServerState.PENDING_APPROVAL, ServerState.DENIED, ServerState.NEEDS_INPUT)

# A session may route calls to a server in these states (a degraded one still answers).
CALLABLE_STATES = (ServerState.READY, ServerState.DEGRADED)
