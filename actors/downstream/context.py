"""What a Session may use of the running troupe: a frozen context, built once by the Runtime.

A Session holds no Runtime. It reads published snapshots (the catalogue, the server directory,
the workflows) through read-only functions, and asks for the few acts it may ask for (find a
connection, set a log level, tell the upstreams of a roots change, say that its client left, run
a core tool) through the functions given here. Everything else about the Runtime is wiring.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import gevent.event

    from actors.catalogue.snapshot import Catalogue
    from actors.protocol.request_state import StateSealer
    from actors.settings.model import ServeConfig


@dataclass(frozen=True, slots=True)
class SessionContext:
    """The Session's view of troupe (see the module's docstring). Built by Runtime.session_context."""

    serve: ServeConfig  # the serve section (fixed for a run: a reload changes servers and workflows only)
    profile_of: Callable[[Any], Any]  # a serve.clients entry (or None) → its catalogue Profile (or None)
    bus: Any  # the BusClient: subscribe and unsubscribe
    catalogue: Callable[[], Catalogue]  # the Registry's published snapshot, now
    servers: Callable[[], Any]  # the Supervisor's published Directory, now
    workflows: Callable[[], Any]  # the WorkflowKeeper's published WorkflowSet, now
    settled: gevent.event.Event  # set once every auto-start server is ready or failed
    sealer: StateSealer  # seals and opens requestState and other state handed to clients
    cache: Any  # the CacheKeeper's ref, or None without caching
    connection: Callable[[str], Any]  # a server's live Connection, or None
    connection_or_status: Callable[..., tuple]  # (Connection or route, why not): see Runtime.connection_or_status
    server_timeout: Callable[[str], float]
    retry_tools: Callable[[str], bool]  # may an idempotent tool of that server be sent again after a restart
    passthrough_server: Callable[[], str | None]  # flat mode's one unprefixed server
    sign_ins: Callable[[], list]  # servers waiting for troupe's own OAuth sign-in
    client_sign_ins: Callable[[str, Callable[[str], bool]], list]  # those a named client must sign in to
    set_log_level: Callable[[Any, str | None], None]  # a Session's wish for upstream logs (the Supervisor's)
    notify_upstreams: Callable[[str], None]  # a notification to every live upstream (roots changed)
    client_left: Callable[[Any], None]  # a Session stops: its own upstreams (share: per_client) stop
    # (name, args, catalogue, client name): a core_* tool, blocking: from a greenlet of its own
    run_core: Callable[..., dict]
    slowest_timeout: Callable[[], float]  # the longest server timeout configured now (workflow deadlines)
    tasks: Any = None  # the TaskKeeper's ref (actors/tasks), or None when tasks are off
    task_ids: Any = None  # the TaskIds that seal and open the task ids handed to clients
    tracing: Any = None  # actors.ops.tracing.Tracing when spans are exported, else None (the hooks' guard)
    observer: Any = None  # the ops.observer.Observer told how each call ended, or None (no audit trail)
    rates: Any = None  # the RateLimiter (actors/ratelimit): checked before each call to a server
    # Servers on demand: (server, method) asks the Supervisor to start an idle one; server_changes()
    # is the event the Directory's next publish sets (None: not waitable, poll).
    wake: Callable[[str, str], None] = lambda server, method: None
    server_changes: Callable[[], Any] = lambda: None


def for_runtime(rt) -> SessionContext:
    """The context of a Session on started Runtime `rt`: the published snapshots it reads and the
    few acts it may ask for, bound once; the Session keeps no reference to `rt` itself."""
    from actors.catalogue.views import profile_of
    from actors.downstream import coretools
    from actors.settings.model import DEFAULT_TIMEOUT
    assert rt.bus is not None  # sessions start on a started runtime
    return SessionContext(
        serve=rt.config.serve, profile_of=lambda client: profile_of(rt.config, client), bus=rt.bus,
        catalogue=rt.catalogue, servers=lambda: rt.servers.current, workflows=lambda: rt.workflows.current,
        settled=rt.settled, sealer=rt.sealer, cache=rt.cache, connection=rt.connection,
        connection_or_status=rt.connection_or_status, server_timeout=rt.server_timeout,
        retry_tools=rt.retry_tools, passthrough_server=rt.passthrough_server, sign_ins=rt.sign_ins,
        client_sign_ins=rt.client_sign_ins, set_log_level=rt.set_log_level,
        notify_upstreams=rt.notify_upstreams, client_left=rt.client_left,
        run_core=lambda name, args, view, client=None: coretools.run(name, args, rt, view, client),
        slowest_timeout=lambda: max((s.timeout for s in rt.config.servers), default=DEFAULT_TIMEOUT),
        tasks=rt.tasks, task_ids=rt.task_ids, observer=rt.observer, rates=rt.rates, tracing=rt.tracing,
        wake=rt.wake, server_changes=lambda: rt.servers.changed)
