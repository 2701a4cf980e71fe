"""What the Supervisor reports of its servers: one plain dict per server, the StatusReport around
them, and the LaunchFacts an approval is decided on.

Built from the Supervisor's Child records inside its actor (GetStatus, ControlServer,
DescribeLaunch); what it shows of a launch is starred by actors.redact and actors.trust,
never env or header values.
"""
from __future__ import annotations

import time
from types import MappingProxyType
from typing import Callable, Iterable

from actors import __version__
from actors.messages import LaunchFacts, StatusReport
from actors.settings.model import SHARE_PER_CLIENT
from actors.supervision.child import Child
from actors.supervision.states import ServerState
from actors.trust import provenance as trust

# The states whose reason is an error worth showing as `last_error`.
ERROR_STATES = (ServerState.BACKOFF, ServerState.FAILED, ServerState.DEGRADED)


def server_status(child: Child) -> dict:
    """One server's entry: the edge adds the live generation's call statistics (Runtime.status)."""
    config = child.config
    tools, resources, prompts = child.counts
    listed = child.callable or child.state == ServerState.IDLE  # an idle server's kept lists are served
    out = {"name": config.name, "state": child.state, "since": child.since, "reason": child.reason,
           "transport": config.transport, "source": config.source, "provenance": config.provenance,
           "origin_file": config.origin_file, "enabled": config.enabled,
           "auto_start": config.auto_start, "restarts": child.restarts,
           "last_error": child.reason if child.state in ERROR_STATES else None,
           "tools": tools if listed else 0, "resources": resources if listed else 0,
           "prompts": prompts if listed else 0,
           "pid": None, "url": config.shown_url,
           "launch": config.launch_facts(), "shown_launch": trust.shown_launch(config),
           "server_info": child.server_info, "era": child.known_era(), "share": config.share,
           "start": config.start}
    if config.on_demand:
        out.update(idle_stop=config.idle_stop, wakes=child.wakes, last_wake=child.last_wake)
    if child.callable and child.endpoint:
        out["pid"] = child.endpoint.get("pid")
    out.update(child.retired.to_json())
    return out


def _with_clients(entry: dict, child: Child, per_client) -> dict:
    if per_client is not None and child.config.share == SHARE_PER_CLIENT:
        entry["per_client"] = per_client(child.config.name)
    return entry


def launch_facts(child: Child, verdict: str) -> LaunchFacts:
    """DescribeLaunch's answer: the identity stays in process; `shown` is the redacted launch line."""
    config = child.config
    return LaunchFacts(config.name, trust.identity_key(config), config.provenance, verdict,
                       trust.shown_launch(config), config.origin_file)


def status_report(children: Iterable[Child], *, started_at: float, url: str | None, mode: str,
                  per_client: Callable[[str], dict] | None = None) -> StatusReport:
    """Every server in start order; `ready` once each first start attempt has ended. A `share:
    per_client` server's entry has `per_client` (per_client(name): its clients' own upstreams)."""
    children = tuple(children)
    return StatusReport(ready=all(c.settled for c in children), uptime_s=time.time() - started_at,
                        started_at=started_at, url=url, mode=mode,
                        servers=tuple(_with_clients(server_status(c), c, per_client) for c in children),
                        version=__version__,
                        retired=MappingProxyType({c.config.name: c.retired for c in children}))
