"""Early start: the config's stdio servers are launched as soon as the config is read, while troupe
is still importing the rest of itself, so their own start-up (an interpreter, `npx` resolving a
package) runs beside troupe's instead of after it. Reading the config and launching load neither
loguru nor the catalogue nor the runtime (tests/unit/test_early_launch_order.py): those come after,
beside the servers' start.

Only what the Supervisor would launch at once anyway is started early: a stdio server of the config
file, enabled, started always (not on demand, not one per client), outside a cluster (where a
lease decides which instance runs it), that the approvals file does not deny (an operator's
denial wins over the config, as in the Supervisor's gate). Each process is handed once, by name
and exact launch spec, to the transport that opens it (actors/transports/factory.py); one that no
transport takes (the config was reloaded, the server was denied meanwhile) is stopped when the
start-up settles, and everything left at the runtime's stop.

At most EARLY_MAX processes start early: each competes for the CPU with troupe's own start, and a
client's `initialize` is answered only once troupe has loaded. The rest start as before, from the
Supervisor, a moment later. (With 50 servers, 3 or 4 early instead of 2 changed nothing in when all
were listed and held the first `initialize` 10-20 ms longer.)
"""
from __future__ import annotations

import os

import gevent

from actors.settings.model import Config, ServerConfig, SHARE_ALL, StdioSpec
from actors.transports.child_process import ChildProcess

EARLY_MAX = max(2, os.cpu_count() or 2)


class EarlyStarts:
    """The processes launched early, by server name, until their transport takes each (once).
    Used from the hub's greenlets only (the transports' owners open them one at a time)."""

    def __init__(self, procs: dict[str, tuple[StdioSpec, ChildProcess]]) -> None:
        self._procs = procs

    def __len__(self) -> int:
        return len(self._procs)

    def take(self, name: str, spec: StdioSpec | None) -> ChildProcess | None:
        """The process started early for server `name`, if it was started with exactly `spec`; a
        process started from another spec (the config changed) is stopped, never handed over."""
        entry = self._procs.pop(name, None)
        if entry is None:
            return None
        started_with, proc = entry
        if started_with == spec:
            return proc
        self._discard(name, proc)
        return None

    def discard_rest(self, wait: float = 0.0) -> None:
        """Stop every process no transport took, each in its own greenlet (a stop takes seconds);
        `wait`: block this long at most for them, when troupe is about to exit."""
        procs, self._procs = self._procs, {}
        stops = [self._discard(name, proc) for name, (_, proc) in procs.items()]
        if wait and stops:
            gevent.joinall(stops, timeout=wait)

    @staticmethod
    def _discard(name: str, proc: ChildProcess) -> gevent.Greenlet:
        from loguru import logger

        from actors.transports import stdio
        logger.debug("{}: started early but not used; stopping it", name)
        return gevent.spawn(stdio.discard, proc)


def eligible(server: ServerConfig) -> bool:
    """Would the Supervisor launch this server at once, by the config alone?"""
    return (server.transport == "stdio" and server.stdio is not None and server.enabled and server.auto_start
            and not server.on_demand and server.share == SHARE_ALL and server.source == "config")


def start(config: Config, approvals_path: str) -> EarlyStarts:
    """Launch the config's eligible stdio servers now (see the module's docstring)."""
    if config.cluster is not None:
        return EarlyStarts({})
    candidates = [s for s in config.servers if eligible(s)]
    if not candidates:
        return EarlyStarts({})
    decisions = _decisions(approvals_path)
    if decisions is None:  # unreadable: the TrustKeeper will say why; nothing starts before it
        return EarlyStarts({})
    from actors.transports import launch
    from actors.transports.base import TransportError
    from actors.trust.provenance import ALLOWED, verdict
    procs: dict[str, tuple[StdioSpec, ChildProcess]] = {}
    for server in candidates:
        assert server.stdio is not None  # eligible() checked
        if len(procs) == EARLY_MAX:
            break
        if verdict(server, decisions) != ALLOWED:
            continue
        try:
            procs[server.name] = (server.stdio, launch.spawn(server.stdio))
        except TransportError:
            continue  # the transport's own open() fails the same way, and reports it
    return EarlyStarts(procs)


def _decisions(path: str) -> dict | None:
    """identity → approved | denied, as the approvals file holds them now; None if unreadable."""
    from actors.trust import ledger
    try:
        return ledger.decisions_of(ledger.Ledger(path).read())  # read() checked its shape
    except ledger.LedgerError:
        return None
