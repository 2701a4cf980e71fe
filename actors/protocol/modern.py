"""The stateless 2026-07-28 revision as troupe serves it: what marks a request as modern, how its
`_meta` is checked, and what every modern result carries (resultType, caching hints, serverInfo)."""
from __future__ import annotations

from typing import Any

from actors.protocol import eras, jsonrpc, mcp

META_PREFIX = "io.modelcontextprotocol/"
META_VERSION = META_PREFIX + "protocolVersion"
META_CAPABILITIES = META_PREFIX + "clientCapabilities"
META_CLIENT_INFO = META_PREFIX + "clientInfo"
META_LOG_LEVEL = META_PREFIX + "logLevel"
META_SERVER_INFO = META_PREFIX + "serverInfo"
META_SUBSCRIPTION = META_PREFIX + "subscriptionId"

DISCOVER = "server/discover"
LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"

# The revision's own error codes (-32020..-32099 are reserved for the spec).
HEADER_MISMATCH = -32020
MISSING_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022

# Methods the revision removed: a modern request for one is "method not found".
REMOVED = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
# Notifications the revision removed: sent with the modern envelope they are ignored, since a
# modern request carries its own state (its capabilities name its roots support, for instance).
REMOVED_NOTIFICATIONS = frozenset({"notifications/initialized", "notifications/roots/list_changed"})
# What a subscriptions/listen filter may ask for: the boolean kinds and the list notice each one names.
LISTEN_KINDS = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
# Caching hints: the catalogue is the same for every client (public) and changes when servers
# come and go; a read from an upstream is that upstream's answer now (private, not to be reused).
LIST_TTL_MS = 30_000
DISCOVER_TTL_MS = 300_000
CACHED_LISTS = frozenset({"tools/list", "resources/list", "resources/templates/list", "prompts/list"})


def is_modern(params: Any) -> bool:
    """A request is served statelessly when its _meta names a protocol version."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_VERSION in meta


class Envelope:
    """What one modern request says about its client, read from its own `_meta` after
    check_meta accepted it: its capabilities and the log level it asked for (None: no logs).
    Nothing of it outlives the request."""

    __slots__ = ("capabilities", "log_level", "client_info")

    def __init__(self, meta: dict) -> None:
        self.capabilities: dict = dict(meta.get(META_CAPABILITIES) or {})
        self.log_level: str | None = meta.get(META_LOG_LEVEL)
        self.client_info: dict = dict(meta.get(META_CLIENT_INFO) or {})

    def logs(self, level: str) -> bool:
        """True if a log line at `level` goes with this request."""
        if self.log_level is None:
            return False
        known = level if level in mcp.LOG_LEVELS else "info"
        return mcp.LOG_LEVELS.index(known) >= mcp.LOG_LEVELS.index(self.log_level)


def listen_filter(params: dict) -> dict | str:
    """subscriptions/listen's `notifications` filter, checked; a string says what is wrong with it."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        return "subscriptions/listen needs 'notifications' (an object)"
    for key in LISTEN_KINDS:
        if key in wanted and not isinstance(wanted[key], bool):
            return f"notifications.{key} must be a boolean"
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
        return "notifications.resourceSubscriptions must be an array of URIs"
    task_ids = wanted.get("taskIds", [])
    if not isinstance(task_ids, list) or not all(isinstance(t, str) for t in task_ids):
        return "notifications.taskIds must be an array of task ids"
    return wanted


def missing_envelope(rid, params: Any) -> dict | None:
    """-32602 for a request sent as modern (its MCP-Protocol-Version header says so) whose params
    carry no `_meta` naming a version: the header alone does not make an envelope, and without one
    the request would be served as if from a legacy session. None when the envelope is there."""
    if is_modern(params):
        return None
    meta = params.get("_meta") if isinstance(params, dict) else None
    missing = "params._meta" if not isinstance(meta, dict) else f"_meta.{META_VERSION}"
    return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"{missing} is required in a 2026-07-28 request")


def check_meta(rid, method: str, params: dict) -> dict | None:
    """None if the request's _meta is acceptable, else the error response to send."""
    meta = params["_meta"]
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"_meta.{META_VERSION} must be a string")
    if version not in mcp.MODERN_VERSIONS:
        return jsonrpc.error(rid, UNSUPPORTED_VERSION, f"unsupported protocol version {version!r}",
                             {"supported": list(mcp.MODERN_VERSIONS), "requested": version})
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"_meta.{META_CAPABILITIES} is required (an object)")
    if META_CLIENT_INFO in meta and not isinstance(meta[META_CLIENT_INFO], dict):
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"_meta.{META_CLIENT_INFO} must be an object")
    if META_LOG_LEVEL in meta and meta[META_LOG_LEVEL] not in mcp.LOG_LEVELS:
        return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS,
                             f"_meta.{META_LOG_LEVEL} must be one of {', '.join(mcp.LOG_LEVELS)}")
    if method in REMOVED:
        return jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"method not found: {method} (removed in {version})")
    return None


def without_envelope(params: dict) -> dict:
    """params without the envelope's keys, which are troupe's to read, not an upstream's: a dual-era
    upstream in a legacy session must not take a forwarded call for a modern one."""
    meta = {k: v for k, v in params["_meta"].items() if not k.startswith(META_PREFIX)}
    out = {k: v for k, v in params.items() if k != "_meta"}
    if meta:
        out["_meta"] = meta
    return out


def capabilities(tasks: bool = False) -> dict:
    """What troupe backs for a modern client: list changes and resource updates on a
    subscriptions/listen stream, logs with the request that asked for them (its logLevel), the
    extensions it carries (tasks, when it offers them)."""
    extensions = {k: dict(v) for k, v in mcp.SERVED_EXTENSIONS.items()}
    if tasks:
        extensions[mcp.TASKS_EXTENSION] = {}
    return {"tools": {"listChanged": True}, "resources": {"listChanged": True, "subscribe": True},
            "prompts": {"listChanged": True}, "logging": {}, "completions": {}, "extensions": extensions}


def discover_result(instructions: str, tasks: bool = False) -> dict:
    """server/discover: every version troupe speaks (modern first), for either era's client."""
    return {"supportedVersions": [*mcp.MODERN_VERSIONS, *mcp.SUPPORTED_VERSIONS],
            "capabilities": capabilities(tasks), "serverInfo": mcp.SERVER_INFO, "instructions": instructions,
            "resultType": "complete", "ttlMs": DISCOVER_TTL_MS, "cacheScope": "public"}


def finish(method: str, result: dict, scope: str = "public") -> dict:
    """A modern result: resultType, troupe's serverInfo in _meta, and caching hints for lists and reads
    (`scope` private when lists differ by who asks: a shared cache must not pass one client's on).
    What only the handshake era has is left out (eras; a tools/list page is cut from the
    catalogue's modern_tool_list already): an upstream's answer reaches a modern client in the
    modern shape, whichever era the upstream speaks. The serverInfo is troupe's even
    over an upstream's own stamp: troupe is the server this client talks to (server/discover says so)."""
    out = dict(result)
    out.setdefault("resultType", "complete")
    meta = eras.legacy_meta_dropped(dict(out.get("_meta") or {}))
    meta[META_SERVER_INFO] = mcp.SERVER_INFO
    out["_meta"] = meta
    if method in CACHED_LISTS:
        out.setdefault("ttlMs", LIST_TTL_MS)
        out.setdefault("cacheScope", scope)
    elif method == "resources/read":
        out["ttlMs"], out["cacheScope"] = 0, "private"  # an upstream's answer, for this caller, now
    return out


class ModernSink:
    """The sink a modern request is answered through: its own result gets finish(); anything
    else (progress, logs, errors, other requests' answers) passes unchanged. It carries the
    request's Envelope, so whatever later handles the request (a forwarded call settling, a
    server request it triggered, a log line) reads the client's capabilities from the request
    itself, never from the session. So do `principal` (who sent it), `digest` (what a retry of it
    must repeat) and `retry` (the opened requestState and inputResponses of a retry, if it is one)."""

    __slots__ = ("rid", "method", "sink", "envelope", "principal", "digest", "retry", "scope")

    def __init__(self, rid, method: str, sink, envelope: Envelope | None = None, *, principal: str = "",
                 digest: str = "", retry: Any = None, scope: str = "public") -> None:
        self.rid, self.method, self.sink = rid, method, sink
        self.envelope = envelope if envelope is not None else Envelope({})
        self.principal, self.digest, self.retry, self.scope = principal, digest, retry, scope

    def __call__(self, message) -> None:
        if isinstance(message, dict) and message.get("id") == self.rid and isinstance(message.get("result"), dict) \
                and "method" not in message:
            message = {**message, "result": finish(self.method, message["result"], self.scope)}
        self.sink(message)


def finishing_sink(rid, method: str, sink, envelope: Envelope | None = None, **request) -> ModernSink:
    """The ModernSink for request `rid` (`request`: its principal, digest and retry)."""
    return ModernSink(rid, method, sink, envelope, **request)


def input_required(outcome: Any) -> bool:
    """A result asking the client for input before the request can complete (MRTR)."""
    return isinstance(outcome, dict) and outcome.get("resultType") == "input_required"


def envelope_of(sink) -> Envelope | None:
    """The Envelope of the modern request `sink` answers, or None for a legacy session's sink."""
    return sink.envelope if isinstance(sink, ModernSink) else None
