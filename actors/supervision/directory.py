"""The server directory: the Supervisor's immutable snapshot of every server, read with no actor hop."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

import pykka

from actors.settings.model import ServerConfig
from actors.supervision.states import CALLABLE_STATES, ServerState


@dataclass(frozen=True, slots=True)
class ServerView:
    """One server as the Supervisor last published it."""

    name: str
    config: ServerConfig
    state: ServerState
    reason: str
    ref: pykka.ActorRef | None  # the live connection, when there is one
    generation: int
    settled: bool  # its first start attempt has ended (ready, failed, or waiting for approval)
    counts: tuple  # (tools, resources, prompts) it lists
    # In a cluster, a `single` server's calls go through its FailoverFront (actors/cluster/failover),
    # which holds them while its lease moves (`held`) and sends them on to its Connection.
    front: pykka.ActorRef | None = None
    held: bool = False

    @property
    def callable(self) -> bool:
        return self.state in CALLABLE_STATES and self.ref is not None

    def call_target(self) -> pykka.ActorRef | None:
        """Where a call to it goes now: its front (while it is callable or its calls are held), else
        its live Connection; None when a call would fail at once."""
        if self.front is not None and (self.callable or self.held):
            return self.front
        return self.ref if self.callable else None


@dataclass(frozen=True, slots=True)
class Directory:
    """Every server, by name, and every client's own upstream of a `share: per_client` server,
    by (server, the client Session's actor_urn); replaced whole by the Supervisor after each change
    (published as a Published[Directory] whose Publisher only the Supervisor holds)."""

    version: int = 0
    servers: Mapping[str, ServerView] = field(default_factory=lambda: MappingProxyType({}))
    clients: Mapping[tuple[str, str], ServerView] = field(default_factory=lambda: MappingProxyType({}))

    def get(self, name: str | None) -> ServerView | None:
        return self.servers.get(name) if name is not None else None
