"""The frozen config objects a loaded config file becomes (ServerConfig, ServeConfig, Config…),
and the defaults and allowed values of their fields. Reading and checking a file is config.py's job."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from actors import redact
from actors.settings.cache_section import CacheConfig, ServerCache
from actors.settings.rate_section import RateConfig
from actors.ops.trace_settings import TelemetryConfig
from actors.settings.upstream_auth import UpstreamAuth

TRANSPORT_TYPES = ("stdio", "sse", "streamable-http")
SERVE_TRANSPORTS = ("stdio", "http")
MODES = ("meta", "flat")
DEFAULT_TIMEOUT = 30.0  # seconds per request to a server, unless its config says otherwise
# A server's `share:`: one upstream for every client, or each downstream client its own.
SHARE_ALL, SHARE_PER_CLIENT = "all", "per_client"
SHARES = (SHARE_ALL, SHARE_PER_CLIENT)
# A server's `start:`: running from troupe's start, or only while used (servers on demand).
START_ALWAYS, START_ON_DEMAND = "always", "on_demand"
START_MODES = (START_ALWAYS, START_ON_DEMAND)
DEFAULT_IDLE_STOP_S = 300.0  # an on-demand server with nothing going on for this long is stopped
SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")

# HTTP front limits (serve.*): what one troupe holds open for its downstream clients.
DEFAULT_SESSION_IDLE_S = 600.0  # a Streamable HTTP session with nothing in flight for this long is closed
DEFAULT_MAX_SESSIONS = 1000  # open MCP sessions over HTTP (Streamable and legacy SSE together)
DEFAULT_HEADER_TIMEOUT_S = 10.0  # to send a whole request head; also the longest pause inside a body
DEFAULT_MAX_CONNECTIONS = 512  # connections served at once; more are answered 503 and closed
DEFAULT_CLIENT_SESSIONS = 100  # profiles.<name>.max_sessions: open sessions one client may hold
DEFAULT_MAX_BATCH = 100  # requests in one JSON-RPC batch; a bigger batch is refused whole (-32600)
# What one server's tool list may bring into the catalogue (actors/upstream/tool_limits.py):
# past these troupe's snapshot, search index and answers would grow with whatever a server lists.
DEFAULT_MAX_TOOLS = 10_000
DEFAULT_MAX_TOOL_BYTES = 64 * 1024  # one tool's definition, as JSON
DEFAULT_STREAM_BUFFER_BYTES = 4 * 1024 * 1024  # unsent bytes held for one reader (actors/serve/stream_buffer.py)


@dataclass(frozen=True, slots=True)
class StdioSpec:
    """How to launch a stdio server: command, args, env and working directory (env values never shown)."""

    command: str
    args: tuple = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    work_dir: str | None = None

    def __repr__(self) -> str:  # env values are secrets: never in a repr or a log line
        return (f"StdioSpec(command={self.command!r}, args={tuple(redact.redact_args(self.args))!r}, "
                f"env_keys={sorted(self.env)!r})")


@dataclass(frozen=True, slots=True)
class HttpSpec:
    """Where an SSE or Streamable HTTP server is reached: its URL and the headers sent with each request."""

    url: str
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __repr__(self) -> str:
        return f"HttpSpec(url={redact.redact_url(self.url)!r}, header_names={sorted(self.headers)!r})"


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """Restart policy overrides; None means the supervisor's default."""

    intensity: int | None = None
    period: float | None = None
    min_backoff: float | None = None
    max_backoff: float | None = None
    hung_after: int | None = None  # timeouts in a row that, with a failed ping, mean hung (0: never)


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One upstream server, frozen: its transport and launch spec, whether and how it starts,
    its per-request limits and restart policy, where it came from (source, provenance,
    origin_file), and what an approval and the tool pins cover (identity, preapproved, pin)."""

    name: str
    transport: str  # stdio | sse | streamable-http
    stdio: StdioSpec | None = None
    http: HttpSpec | None = None
    enabled: bool = True
    auto_start: bool = True
    timeout: float = DEFAULT_TIMEOUT
    prefix: str | None = None  # None = the server's name; "" = no prefix
    max_in_flight: int = 64
    max_queued: int = 1000  # calls beyond max_in_flight wait in a FIFO this long; only a full one says busy
    max_message_bytes: int = 16 * 1024 * 1024
    retry_idempotent_tools: bool = False  # retry a tools/call once after a reconnect if the tool says idempotentHint
    policy: PolicySpec = PolicySpec()
    source: str = "config"  # where this server came from (config file, discovery provider…)
    # Trust (see actors/trust): who put this server here, and what approval covers.
    provenance: str = "config"  # config | user | project | path | registered
    identity: str | None = None  # whole launch line or URL; None = computed from stdio/http
    origin_file: str | None = None  # the file (or store) that defined it, for approvals
    preapproved: bool | None = None  # the client's own approval (True) or denial (False), if any
    pin: bool = True  # pin tool and prompt definitions; false trusts whatever the server lists
    needs_input: tuple[str, ...] = ()  # variables its client file left unresolved: never started with them
    placement: str | None = None  # in a cluster: single | replicated; None = by transport (stdio: single)
    auth: UpstreamAuth | None = None  # an HTTP server's OAuth settings (actors/settings/upstream_auth.py)
    cache: ServerCache | None = None  # which of its answers troupe caches (actors/settings/cache_section.py)
    share: str = SHARE_ALL  # all: one upstream for everyone; per_client: each client its own (supervision/per_client)
    max_tools: int = DEFAULT_MAX_TOOLS  # tools served of its list; the rest refused (a /status note)
    max_tool_bytes: int = DEFAULT_MAX_TOOL_BYTES  # a bigger tool definition is refused (a /status note)
    # How long a task troupe mints around one of its calls may run (its `tasks.max_duration`);
    # None: serve.tasks.max_duration. Its `timeout` still bounds every call that is not a task.
    task_max_duration: float | None = None
    # Servers on demand (supervision/on_demand.py): `on_demand` runs only while used, serving its
    # pinned lists while stopped, and stops after `idle_stop` seconds with nothing going on.
    start: str = START_ALWAYS
    idle_stop: float = DEFAULT_IDLE_STOP_S

    @property
    def on_demand(self) -> bool:
        return self.start == START_ON_DEMAND

    @property
    def effective_prefix(self) -> str:
        return self.name if self.prefix is None else self.prefix

    @property
    def shown_url(self) -> str | None:
        """The URL as a status report may show it (query values and password starred)."""
        return redact.redact_url(self.http.url) if self.http else None

    def launch_facts(self) -> dict:
        """What the status report may show: never env or header values, secret args starred."""
        if self.stdio is not None:
            return redact.launch_facts(self.stdio.command, self.stdio.args)
        return redact.launch_facts(None, url=self.http.url if self.http else None)


@dataclass(frozen=True, slots=True)
class ClientEntry:
    """One of serve.clients: a client of the HTTP front, known by its bearer token, served in a
    profile (None: the whole catalogue). Its repr never shows the token."""

    name: str
    token: str = field(repr=False)
    profile: str | None = None


@dataclass(frozen=True, slots=True)
class TasksConfig:
    """serve.tasks: when troupe answers a task-capable client's call to a server without tasks with
    a task of its own (`mint_after` seconds without an answer; 0: at once; None: never), how long
    such a task may run and its result is kept, what one client may hold, and the bytes of
    results kept in all."""

    mint_after: float | None = 1.0
    ttl: float = 600.0  # seconds a finished task's result is kept
    max_duration: float = 3600.0  # seconds a minted task's upstream call may run (a server's own overrides)
    max_per_client: int = 100  # live (unfinished) tasks one client may hold
    max_result_bytes: int = 4 * 1024 * 1024  # one task's result; a bigger one fails the task
    max_bytes: int = 64 * 1024 * 1024  # every kept result together; the oldest finished go first
    poll_interval_ms: int = 1000  # the pollIntervalMs troupe suggests for its own tasks


@dataclass(frozen=True, slots=True)
class ServeConfig:
    """The `serve:` section: how troupe faces its clients (stdio or HTTP, meta or flat mode,
    address, auth token, allowed hosts and origins, start-up wait, HTTP session limits)."""

    transport: str = "stdio"
    mode: str = "meta"
    separator: str = "__"
    host: str = "127.0.0.1"
    port: int = 8765
    auth_token: str | None = None
    state_key: str | None = None  # seals input rounds' requestState; None = generated and stored
    allowed_origins: tuple = ()
    allowed_hosts: tuple = ()
    startup_wait: float = 10.0
    json_response: bool = False  # Streamable HTTP: answer with JSON even when the client takes SSE
    client_admin: bool = False  # MCP clients may stop/start/restart/unregister servers (a model is not an operator)
    session_idle: float = DEFAULT_SESSION_IDLE_S
    max_sessions: int = DEFAULT_MAX_SESSIONS
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_batch: int = DEFAULT_MAX_BATCH  # requests in one JSON-RPC batch, on every front
    stream_buffer_bytes: int = DEFAULT_STREAM_BUFFER_BYTES  # per reader; then notifications drop
    clients: tuple = ()  # ClientEntry each; when set, every MCP request must carry one's token
    profile: str | None = None  # the stdio client's profile (--profile); None: the whole catalogue
    tasks: TasksConfig = TasksConfig()  # serve.tasks: tasks relayed and minted (actors/tasks)

    def __repr__(self) -> str:
        return (f"ServeConfig(transport={self.transport!r}, mode={self.mode!r}, host={self.host!r}, "
                f"port={self.port!r}, auth={'set' if self.auth_token else 'none'}, clients={len(self.clients)})")


@dataclass(frozen=True, slots=True)
class Config:
    """A whole loaded config: the servers, the serve section, the raw `discovery:` settings,
    the file it came from, where the approvals file lives, and the workflows."""

    servers: tuple = ()
    serve: ServeConfig = ServeConfig()
    discovery: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    path: str | None = None
    approvals_file: str | None = None  # trust.approvals_file; None = <config dir>/approvals.json
    cluster: Any = None  # a cluster.settings.ClusterConfig when several instances share Redis; None: alone
    profiles: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))  # name → views.Profile
    workflows: tuple = ()  # workflows.definitions.Workflow each, from the config's `workflows:`
    workflows_dir: str | None = None  # a directory of one-workflow files, watched at run time
    cache: CacheConfig = CacheConfig()  # the response cache's store (actors/caching)
    rates: RateConfig = RateConfig()  # rate limits by profile, server and for anonymous clients (actors/ratelimit)
    telemetry: TelemetryConfig = TelemetryConfig()  # where spans go (actors/ops/trace_settings.py)
    audit: Any = None  # an audit_section.AuditConfig when `audit.file` is set (actors/ops); None: no audit trail

    def profile(self, name: str | None):
        """The Profile named (None: no profile, the whole catalogue)."""
        return self.profiles.get(name) if name is not None else None

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)
