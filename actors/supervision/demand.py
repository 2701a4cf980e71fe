"""The messages of servers on demand: a first use wakes an idle server (WakeServer), a Connection
with nothing going on proposes its stop (ConnectionIdle), the Supervisor agrees (StopIdle) and the
Connection, if still idle, confirms (ConnectionIdled) before the Supervisor stops it.

The two-step stop is what keeps a call from being lost at the boundary: the Connection alone
sees its own mailbox, so only it can say "nothing came in since"; once it has said so, any call
that still reaches it is answered as never sent (UpstreamError.link == "unsent"), and its Session
wakes the server again and sends the call to the next Connection.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class WakeServer:
    """Told to the Supervisor by a Session whose call found an on-demand server idle (no reply:
    the Session waits on the Directory, under its call's own deadline). Concurrent wakes of one
    server share one start: only an idle server is started."""

    server: str
    method: str = ""  # what woke it (tools/call, resources/read…), for the ServerWoken event


@dataclass(frozen=True, slots=True)
class ConnectionIdle:
    """Told by an on-demand Connection to the Supervisor: nothing has gone on for its idle_stop
    (no request in flight or queued, no resource subscription); `activity` is its activity count
    then, echoed by StopIdle."""

    server: str
    generation: int
    activity: int
    idle_s: float


@dataclass(frozen=True, slots=True)
class StopIdle:
    """Told by the Supervisor to a Connection: stop if nothing went on since `activity` (no
    client's own upstream of it is attached). `learned`: the start that read its lists."""

    generation: int
    activity: int
    learned: bool = False


@dataclass(frozen=True, slots=True)
class ConnectionIdled:
    """Told by a Connection to the Supervisor after StopIdle found it still idle: it takes no call
    from now on (each is answered as unsent); the Supervisor stops it and marks the server idle."""

    server: str
    generation: int
    idle_s: float
    learned: bool = False


@dataclass(frozen=True, slots=True)
class LearnDone:
    """The Supervisor's own timer, a moment after the start that learned an on-demand server's
    lists: stop it now (late list_changed notices had their chance). No reply."""

    server: str
    generation: int
