"""Which upstream serves a call (`resolve`, behind Runtime.connection_or_status), and for a
`share: per_client` server the handle (ClientRoute) and messages that reach the Supervisor,
which owns every client's own upstream.

A Session never waits on an actor: it reads the Supervisor's Directory. When its client has no
upstream of that server yet (or it is still starting), the Directory cannot give a ref, so the
Session gets a ClientRoute instead: a tell on it reaches the Supervisor as ForClient, which starts
the upstream and hands the Forward on once it is ready. The caller's own deadline still bounds it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pykka

from actors.settings.model import SHARE_PER_CLIENT
from actors.supervision.directory import Directory, ServerView
from actors.supervision.states import GATED_STATES, ServerState

# A client's own upstream is never started for a server in these states: its operator or its
# trust gate keeps it off for everyone.
CLOSED_STATES = (*GATED_STATES, ServerState.STOPPED)


@dataclass(frozen=True, slots=True)
class ForClient:
    """Told to the Supervisor (through a ClientRoute): `message`, a Forward or a CancelForward, is
    for `client`'s own upstream of `server`; a Forward starts that upstream if there is none and
    waits in the Supervisor until it is ready. No reply: a Forward is answered through its own
    on_reply (by the upstream, or by the Supervisor if the upstream cannot be had)."""

    server: str
    client: str  # the client Session's actor_urn
    message: Any
    # The client's Session: the upstream's owner, asked what the server asks and watched for its
    # end, whoever sends the first Forward (the TaskKeeper sends a task's call on its behalf).
    owner: Any = None


@dataclass(frozen=True, slots=True)
class ClientLeft:
    """Told to the Supervisor by a Session that stops: every upstream of that client stops. No reply."""

    client: str  # the Session's actor_urn


@dataclass(frozen=True, slots=True)
class ClientRestartDue:
    """The Supervisor's own timer: restart `client`'s upstream of `server` after its backoff, if
    `attempt_id` is still the upstream's current timer. No reply."""

    server: str
    client: str
    attempt_id: int


@dataclass(frozen=True, slots=True)
class SweepClients:
    """The Supervisor's own timer: stop every client's upstream whose Session is no longer alive
    (its ClientLeft was lost: a crash before on_stop). No reply."""


@dataclass(frozen=True, slots=True)
class ClientRoute:
    """Stands where a Session keeps a connection's ref while its client's own upstream is not
    published yet: `tell(m)` tells the Supervisor ForClient(server, client, m). Frozen and hashable,
    as a Session's call table keeps it; a stopped Supervisor raises ActorDeadError as a ref would."""

    supervisor: Any
    server: str
    client: str
    owner: Any = None  # the client's Session (ForClient.owner)

    def tell(self, message) -> None:
        try:
            self.supervisor.tell(ForClient(self.server, self.client, message, self.owner))
        except pykka.ActorDeadError:
            raise  # as a stopped ref's would: the caller's guarded tell (actors/tells.py) takes it



def anonymous_refusal(server: str) -> str:
    return (f"server {server} has `share: per_client` (each client its own upstream): an anonymous stateless "
            f"(2026-07-28) caller is not one client; call it as a named client (serve.clients, with its token) "
            f"or over an MCP session")


def resolve(directory: Directory, supervisor, server: str, client=None,
            anonymous: bool = False) -> tuple[Any, str]:
    """(the live connection, "") or (None, why there is none), so the caller fails at once naming it.

    `client` is the calling Session's ref. For a `share: per_client` server the connection is that
    client's own: its ref once ready, else a ClientRoute through the Supervisor (which starts it).
    An `anonymous` caller (a stateless request that names no client) of such a server is refused.
    """
    view = directory.get(server)
    if view is None:
        return None, f"server {server} is not configured"
    if client is not None and view.config.share == SHARE_PER_CLIENT and view.state not in CLOSED_STATES:
        if anonymous:
            return None, anonymous_refusal(server)
        urn = client.actor_urn
        mine = directory.clients.get((server, urn))
        if mine is None or mine.state == ServerState.STARTING:
            return ClientRoute(supervisor, server, urn, client), ""
        if mine.callable:
            return mine.ref, ""
        return None, why(mine, f"server {server} (this client's own upstream)")
    target = view.call_target()  # a `single` server's front in a cluster, holding while its lease moves
    if target is not None:
        return target, ""
    return None, why(view, f"server {server}")


def why(view: ServerView, named: str) -> str:
    """Why a server (or a client's own upstream of it) takes no calls now."""
    detail = f": {view.reason}" if view.reason else ""
    if view.state == ServerState.BACKOFF:
        return f"{named} is restarting (backoff){detail}"
    if view.state == ServerState.FAILED:
        return f"{named} has failed{detail}"
    return f"{named} is {view.state}{detail}"
