"""What the audit trail records: one CallRecord per client call that reached a server or a core tool,
one ActRecord per operator act; how a call's arguments are digested and its answer classified."""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

import orjson

from actors.messages import UpstreamError
from actors.protocol import jsonrpc
from actors.redact import redact_url

# A call's outcome, one of these.
OK = "ok"
IS_ERROR = "is_error"  # a tool result with isError: true (the server answered, the tool failed)
ERROR = "error"  # a JSON-RPC error, its code in `code`
CANCELLED = "cancelled"  # the client cancelled it (or went away) before its answer
TIMEOUT = "timeout"  # no answer in time (the server's timeout, or troupe's deadline)
CACHE_HIT = "cache_hit"  # answered from troupe's response cache
RATE_LIMITED = "rate_limited"  # refused at once: its client's rate limit was reached
INPUT_REQUIRED = "input_required"  # answered with a round asking the client for input (2026-07-28)
OUTCOMES = (OK, IS_ERROR, ERROR, CANCELLED, TIMEOUT, CACHE_HIT, RATE_LIMITED, INPUT_REQUIRED)

CALL, ACT = "call", "act"  # each line's `kind`


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One client request that reached a server or a core tool, as the audit trail keeps it.

    `time` is when troupe accepted the call (seconds since the epoch), `duration_ms` how long it
    took until its outcome. `instance` names this troupe in a cluster (None alone); `client` and
    `profile` are the serve.clients entry and its profile (None: anonymous, the whole catalogue);
    `session` is the Session's key; `era` is `legacy` (a handshake session) or `modern` (a
    2026-07-28 stateless request). `method` is the MCP method that went out (`tools/call` for a
    meta-tool's call_tool too), `server` the server it reached (`troupe` for a core tool), `target`
    the tool, resource URI or prompt name as that server knows it. `args_sha256` digests the
    canonical arguments (orjson, keys sorted): equal arguments give equal digests, and no
    argument value is ever kept. `outcome` is one of OUTCOMES, `code` the JSON-RPC error code of
    an `error` or `timeout`. `trace_id` is the call's trace (None until tracing fills it): as
    tracing gives it, an int, written as 32 hex digits in the line (off the call path)."""

    time: float
    instance: str | None
    client: str | None
    profile: str | None
    session: str
    era: str
    method: str
    server: str | None
    target: str | None
    args_sha256: str | None
    outcome: str
    code: int | None
    duration_ms: float
    trace_id: int | str | None = None

    def to_json(self) -> dict:
        """The record as one audit line's object (`kind: call`)."""
        return {"kind": CALL, "time": iso_time(self.time), "instance": self.instance, "client": self.client,
                "profile": self.profile, "session": self.session, "era": self.era, "method": self.method,
                "server": self.server, "target": self.target, "args_sha256": self.args_sha256,
                "outcome": self.outcome, "code": self.code, "duration_ms": round(self.duration_ms, 3),
                "trace_id": f"{self.trace_id:032x}" if type(self.trace_id) is int else self.trace_id}


@dataclass(frozen=True, slots=True)
class ActRecord:
    """One operator act: `act` (approve, deny, restart, stop, start, enable, disable, sign-in) on
    `server`, by whom (`by`: the CLI's user, `operator` for serve.auth_token, a client's name; None
    where troupe cannot tell) and through what (`via`: cli, http, embedded, oauth). `time` as
    CallRecord's."""

    time: float
    instance: str | None
    act: str
    server: str
    by: str | None
    via: str

    def to_json(self) -> dict:
        """The record as one audit line's object (`kind: act`)."""
        return {"kind": ACT, "time": iso_time(self.time), "instance": self.instance, "act": self.act,
                "server": self.server, "by": self.by, "via": self.via}


def iso_time(epoch: float) -> str:
    """UTC, to the millisecond: `2026-12-02T13:20:01.123Z` (sorts as text, parses everywhere)."""
    whole = int(epoch)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((epoch - whole) * 1000):03d}Z"


def args_digest(arguments: Any) -> str | None:
    """SHA-256 (hex) of `arguments` as canonical JSON (orjson, keys sorted at every level), so the
    same arguments in another key order give the same digest; None when there are none, or they
    are not JSON (never the case for what a client sent)."""
    if arguments is None:
        return None
    try:
        blob = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    return hashlib.sha256(blob).hexdigest()


def outcome_of(outcome: Any, from_cache: bool = False) -> tuple[str, int | None]:
    """(outcome, JSON-RPC code) of what ended a call, before it is shaped for its client: an
    UpstreamError, a server's result, or a whole JSON-RPC answer. What happened, whatever shape the
    client gets it in (a tools/call that timed out reaches its client as an isError result)."""
    if isinstance(outcome, UpstreamError):
        return (TIMEOUT if outcome.code == jsonrpc.REQUEST_TIMEOUT else ERROR), outcome.code
    result = outcome
    if isinstance(outcome, dict) and "jsonrpc" in outcome:  # a whole answer (a workflow run's, say)
        error = outcome.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            code = code if isinstance(code, int) and not isinstance(code, bool) else None
            return (TIMEOUT if code == jsonrpc.REQUEST_TIMEOUT else ERROR), code
        result = outcome.get("result")
    if from_cache:
        return CACHE_HIT, None
    if isinstance(result, dict):
        if result.get("isError") is True:
            return IS_ERROR, None
        if result.get("resultType") == "input_required":
            return INPUT_REQUIRED, None
    return OK, None


def target_and_arguments(method: str, params: Any) -> tuple[str | None, Any]:
    """What a forwarded request names (the tool, URI or prompt, as its server knows it) and the
    arguments to digest. A task id is never a target: for an anonymous caller it is the capability."""
    if not isinstance(params, dict):
        return None, None
    if method in ("tools/call", "prompts/get"):
        name = params.get("name")
        return (name if isinstance(name, str) else None), params.get("arguments") or {}
    if method in ("resources/read", "resources/subscribe"):
        uri = params.get("uri")  # a URI may carry a password or a token: never kept whole
        return (redact_url(uri) if isinstance(uri, str) else None), None
    if method == "completion/complete":
        ref = params.get("ref")
        name = (ref.get("name") or (redact_url(ref["uri"]) if isinstance(ref.get("uri"), str) else None)) \
            if isinstance(ref, dict) else None
        return (name if isinstance(name, str) else None), params.get("argument")
    return None, {k: v for k, v in params.items() if k != "_meta"}


# What a JSON-RPC code means, in a word or two (the dashboard's last failures say why with it).
_CODE_TEXTS = {jsonrpc.PARSE_ERROR: "parse error", jsonrpc.INVALID_REQUEST: "invalid request",
               jsonrpc.METHOD_NOT_FOUND: "method not found", jsonrpc.INVALID_PARAMS: "invalid params",
               jsonrpc.INTERNAL_ERROR: "internal error", jsonrpc.RESOURCE_NOT_FOUND: "resource not found",
               jsonrpc.REQUEST_TIMEOUT: "no answer in time", jsonrpc.SERVER_UNAVAILABLE: "server unavailable",
               -32003: "rate limited", -32021: "missing capability"}


def code_text(code: int | None) -> str:
    """A JSON-RPC error code's meaning ("" for none, or one troupe does not name)."""
    return _CODE_TEXTS.get(code, "") if code is not None else ""
