"""Commands and replies exchanged by troupe's actors (the protocol on one page).

Ask-style commands carry their reply channel: either a `pykka.ThreadingFuture`
(`reply`, completed exactly once, for slow paths where edge code waits) or a
plain callable sink (`on_reply`, for the tools/call hot path, so no greenlet
ever blocks on it). Every field holds an immutable value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pykka


# ------------------------------------------------------------ Session (downstream)


@dataclass(frozen=True, slots=True)
class ClientMessage:
    """Told by the serve front (stdio, HTTP, embedding) to the client's Session: one decoded message.

    `sink` writes a message back to that client (for Streamable HTTP, to the
    stream of the POST that carried this request). No reply other than via sink. `principal`
    names who sent it when the front knows better than the Session (the shared modern HTTP
    Session serves many callers); empty means the Session's own client.
    """

    message: Any
    sink: Callable[[dict], None]
    principal: str = ""


@dataclass(frozen=True, slots=True)
class ClientGone:
    """Told by the serve front to the Session: its client disconnected; cancel its calls, stop."""

    reason: str = "client disconnected"


@dataclass(frozen=True, slots=True)
class CatalogueUpdated:
    """Told to sessions by the registry's bus event: lists changed (debounced there)."""

    lists: frozenset
    version: int = 0


# ------------------------------------------------------------ Connection (upstream)


@dataclass(frozen=True, slots=True)
class Forward:
    """Told by a Session to a Connection: send a request upstream. Reply: `on_reply(result | UpstreamError)`.

    `on_progress(params)` receives progress for this request with the
    caller's own token already restored; `origin` is the calling session's key
    (for cancellation and server→client routing).
    """

    method: str
    params: Any
    on_reply: Callable[[Any], None]
    timeout: float | None = None
    on_progress: Callable[[dict], None] | None = None
    origin: Any = None
    origin_request: Any = None  # the Session's token for the call: its cancellations and server requests name it
    # The calling client's capabilities; a modern upstream gets their relayable part in each
    # request's _meta (None: troupe's own request, sent with {}).
    client_capabilities: Any = None
    log_level: str | None = None  # a modern request's own logLevel, sent upstream with it (None: the connection's)
    client: str | None = None  # the serve.clients name of the caller: an `auth: per_client` server gets its token
    # The Session judged it safe to send twice (resources/read, prompts/get, completion/complete, a
    # tools/call marked idempotent): a cluster's failover front re-sends it once to a new owner.
    idempotent: bool = False
    # Who is behind the call when a server asks something during it (see RequestTable.asker):
    # None, the origin's client; the TaskKeeper names each task's call apart (its origin is the
    # keeper for every client's task), or NOT_A_CALLER for a request it makes of its own (a poll).
    caller: Any = None


NOT_A_CALLER = False  # Forward.caller of a request on a task's behalf that no client's question may ride


@dataclass(frozen=True, slots=True)
class ForwardReplied:
    """A connection's answer to one forwarded request, told to the calling Session so that the
    Session's own greenlet settles it (the reply callback only tells; it touches no state)."""

    token: int  # which forward this answers (the Session's own id for it; the client's may change)
    outcome: Any  # the result dict or an UpstreamError


@dataclass(frozen=True, slots=True)
class ForwardExpired:
    """The calling Session's own deadline for one forwarded request has passed: whatever became
    of the callee (crashed, dropped the message at teardown, stuck), the client gets its answer."""

    token: int


@dataclass(frozen=True, slots=True)
class CancelForward:
    """Told by a Session to a Connection: its client cancelled or went away, or the Session's
    deadline passed; cancel upstream (or drop from the queue), answer nothing more."""

    origin: Any
    origin_request: Any = None  # None = every request of that origin
    reason: str = "cancelled by client"


@dataclass(frozen=True, slots=True)
class NotifyUpstream:
    """Told by Runtime.notify_upstreams to every live Connection: send this notification upstream
    (e.g. a client's notifications/roots/list_changed). No reply."""

    method: str
    params: Any = None


@dataclass(frozen=True, slots=True)
class SetLogLevel:
    """Told by the Supervisor to each live Connection: ask the upstream (if it declared `logging`)
    to log at this level."""

    level: str


@dataclass(frozen=True, slots=True)
class Inbound:
    """Told by the transport's reader greenlet to its Connection: a message (or TransportGarbage) it read."""

    message: Any


@dataclass(frozen=True, slots=True)
class TransportClosed:
    """Told by the transport's close callback to its Connection: the link is gone; the Connection
    fails every pending call and tells the Supervisor ConnectionFailed."""

    reason: str


@dataclass(frozen=True, slots=True)
class RequestTimedOut:
    """A request's own timer fired (told by the timer greenlet to its Connection)."""

    request_id: int


@dataclass(frozen=True, slots=True)
class QueuedTimedOut:
    """A call still waiting for a free slot ran out of time (told by its timer to its Connection)."""

    ticket: int


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """A failed upstream request, as a value: JSON-RPC error or troupe-side failure."""

    code: int
    message: str
    data: Any = None
    server: str = ""
    link_lost: bool = False  # the connection died under it: safe to retry an idempotent request
    # An HTTP transport's failure below HTTP: "unsent" (the connection was refused: the request never
    # left troupe, so sending it again cannot run it twice) or "lost" (the link broke with the request
    # out: it may have run). Only a cluster's failover front acts on it; "" for everything else.
    link: str = ""

    def to_error(self) -> dict:
        err = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """An upstream's request for a client (sampling, elicitation, roots), routed to a session.

    `on_reply(result_dict | UpstreamError)` answers it, exactly once; `origin_request`
    is the Session's token for the call that triggered it, if known (its stream carries the
    request, or a modern client hears it as input_required).
    """

    server: str
    upstream_id: Any
    method: str
    params: Any
    on_reply: Callable[[Any], None]
    origin_request: Any = None


@dataclass(frozen=True, slots=True)
class ServerRequestCancelled:
    """Told by a Connection to the Session it relayed a ServerRequest to: the upstream cancelled its
    request `upstream_id`, so the Session tells its client notifications/cancelled."""

    server: str
    upstream_id: Any
    # The withdrawn ServerRequest's on_reply: tells it apart from another connection's request with
    # the same id (the TaskKeeper hears from every client's own upstream of one server).
    on_reply: Any = None


@dataclass(frozen=True, slots=True)
class AnswerServer:
    """Told to a Connection by the on_reply of a ServerRequest it relayed: the client's answer
    (or a timeout error), to send upstream."""

    upstream_id: Any
    outcome: Any


# ------------------------------------------------------------ Registry


@dataclass(frozen=True, slots=True)
class PublishServer:
    """Told by a Connection to the Registry after each listing: its full lists, from which the
    Registry rebuilds the catalogue."""

    server: str
    prefix: str
    tools: tuple = ()
    resources: tuple = ()
    templates: tuple = ()
    prompts: tuple = ()
    capabilities: Any = None
    identity: str = ""  # the server's launch line or URL: what its pins are keyed by
    pin: bool = True  # screen tools and prompts against their pins (ServerConfig.pin)
    instructions: str = ""  # from the server's initialize (or discover) result; tool search reads them
    # No client's request has reached the server through this connection yet: what it adds
    # now it added on its own start, not in answer to a call (see registry.FIRST_SIGHT_WINDOW).
    untouched: bool = False
    # An on-demand server's listing: the Registry has the TrustKeeper keep it (KeepListing) when it differs.
    keep: bool = False
    # Called (from the Registry's greenlet; must not block) once a snapshot holding these lists is
    # published: a Connection's first listing reports the server ready only then, so a client
    # that waited for start-up to settle finds the server's tools in the catalogue.
    on_published: Any = None


@dataclass(frozen=True, slots=True)
class DropServer:
    """Told by the Supervisor to the Registry when a server is removed: take its lists out of the catalogue."""

    server: str


# ------------------------------------------------------------ Supervisor


@dataclass(frozen=True, slots=True)
class ConnectionReady:
    """Told by a Connection to the Supervisor: it finished its handshake and first listing
    (generation guards stale news)."""

    server: str
    generation: int
    tools: int
    resources: int
    prompts: int
    server_info: Any = None
    endpoint: Any = None  # {"pid": …} or {"url": …} from the transport


@dataclass(frozen=True, slots=True)
class EraLearned:
    """Told by a Connection to the Supervisor: which protocol era ("modern" or "legacy") the
    server's probe showed, so the next generation of the same server identity starts in it."""

    server: str
    generation: int
    era: str


@dataclass(frozen=True, slots=True)
class ConnectionCounts:
    """Told by a Connection to the Supervisor: its lists were re-read after list_changed."""

    server: str
    generation: int
    tools: int
    resources: int
    prompts: int


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """Told by a Connection to the Supervisor: it failed (open, handshake, transport, hung, or a bug)
    and has failed its pending calls; the Supervisor restarts it with backoff or opens the circuit."""

    server: str
    generation: int
    reason: str


@dataclass(frozen=True, slots=True)
class ConnectionDegraded:
    """Told by a Connection to the Supervisor: alive but unhealthy (repeated timeouts); `ok=True` clears it."""

    server: str
    generation: int
    ok: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RestartDue:
    """Told by the Supervisor's backoff timer to the Supervisor: restart `server` now, unless a newer
    timer (`attempt_id`) or a state change has superseded this one."""

    server: str
    attempt_id: int


@dataclass(frozen=True, slots=True)
class GetStatus:
    """Asked of the Supervisor by Runtime.status. Reply: StatusReport through `reply`."""

    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class ControlServer:
    """Asked of the Supervisor by Runtime.control: restart | stop | start | enable | disable one
    server. Reply: the server's status dict, or an exception."""

    action: str
    server: str
    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class ApplyServers:
    """Told or asked of the Supervisor by Runtime: reconcile with this set of configs (config
    reload or discovery). Reply, if asked: {"added", "removed", "changed"} names.

    `source` scopes removals: only servers whose config came from that source
    are removed when absent.
    """

    servers: tuple
    source: str
    reply: pykka.ThreadingFuture | None = None


@dataclass(frozen=True, slots=True)
class StatusReport:
    """The supervisor's view of everything; what /status, the CLI and core_status show."""

    ready: bool
    uptime_s: float
    started_at: float
    url: str | None
    mode: str
    servers: tuple
    discovery: Any = None
    health: Any = None
    version: str = ""
    retired: Any = None  # server → StatsSnapshot of its ended generations (live ones are asked apart)

    def to_json(self) -> dict:
        return {"ready": self.ready, "uptime_s": round(self.uptime_s, 3), "started_at": self.started_at,
                "url": self.url, "mode": self.mode, "version": self.version,
                "servers": [dict(s) for s in self.servers],
                "discovery": self.discovery, "health": self.health}




@dataclass(frozen=True, slots=True)
class DescribeLaunch:
    """Asked of the Supervisor by Runtime.decide: what an approval of `server` would cover.
    Reply: LaunchFacts, or KeyError for an unknown name."""

    server: str
    reply: Any


@dataclass(frozen=True, slots=True)
class LaunchFacts:
    """Reply to DescribeLaunch: the identity (unredacted, stays in process) and what may be shown."""

    server: str
    identity: str
    provenance: str
    verdict: str  # allowed | pending-approval | denied
    shown: str  # the launch line or URL with secrets redacted
    file: str | None


@dataclass(frozen=True, slots=True)
class SetSessionLogLevel:
    """Told by a Session to the Supervisor: the log level it wants relayed (None = it left)."""

    session: Any
    level: str | None


@dataclass(frozen=True, slots=True)
class GetStats:
    """Asked of a Connection by edge code (status, metrics). Reply: its StatsSnapshot."""

    reply: Any


@dataclass(frozen=True, slots=True)
class ConnectionRetired:
    """Told by a Connection to the Supervisor as it stops: its generation's final counters,
    which the Supervisor adds to the server's totals."""

    server: str
    generation: int
    stats: Any  # StatsSnapshot


@dataclass(frozen=True, slots=True)
class SetUrl:
    """Told by the HTTP server (through Runtime) to the Supervisor once it listens: status shows it."""

    url: str
