"""W3C trace context where MCP carries it: a request's `_meta.traceparent` / `_meta.tracestate`
(SEP-414, either era) and the HTTP `traceparent` / `tracestate` headers. Plain dict work, no
OpenTelemetry: the HTTP fronts and transports call these whether or not troupe traces."""
from __future__ import annotations

import re
from typing import Any, TypeGuard

TRACEPARENT, TRACESTATE = "traceparent", "tracestate"
KEYS = (TRACEPARENT, TRACESTATE)
# version-traceid-parentid-flags, lowercase hex (W3C Trace Context level 1); ids of zeros are invalid
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")
MAX_TRACESTATE = 512  # W3C: a receiver may drop a longer tracestate; troupe drops it
_HEADER_SAFE = re.compile(r"[\x20-\x7e]*")  # a header value with no CR, LF or control character
# The client requests troupe traces (a SERVER span each): the ones that reach a server or a tool.
TRACED_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})


def valid_traceparent(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) == 55 and _TRACEPARENT.fullmatch(value) is not None \
        and not value.startswith("ff")


def valid_tracestate(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and len(value) <= MAX_TRACESTATE and _HEADER_SAFE.fullmatch(value) is not None


def carrier_of(params: Any) -> dict[str, str]:
    """The trace context of a request's params._meta as a propagator's carrier: a well-formed
    traceparent and, with it, its tracestate; {} when there is none (or it is malformed)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict):
        return {}
    parent = meta.get(TRACEPARENT)
    if not valid_traceparent(parent):
        return {}
    state = meta.get(TRACESTATE)
    return {TRACEPARENT: parent, TRACESTATE: state} if valid_tracestate(state) and state else {TRACEPARENT: parent}


def with_context(params: Any, carrier: dict[str, str]) -> dict:
    """A copy of `params` whose _meta carries `carrier` (troupe's own traceparent and tracestate)
    instead of whatever trace context it had: replaced, never added beside the client's."""
    out = dict(params) if isinstance(params, dict) else {}
    given = out.get("_meta")
    meta = dict(given) if isinstance(given, dict) else {}
    meta.pop(TRACEPARENT, None)  # (two pops: cheaper than a comprehension over every key, per call)
    meta.pop(TRACESTATE, None)
    meta.update(carrier)
    out["_meta"] = meta
    return out


def with_traceparent(params: Any, traceparent: str, tracestate: str) -> dict:
    """with_context for troupe's own span, its context given as its two strings (no carrier
    dict: this runs on every traced upstream request)."""
    out = dict(params) if type(params) is dict else {}
    given = out.get("_meta")
    meta = dict(given) if type(given) is dict else {}
    meta[TRACEPARENT] = traceparent
    if tracestate:
        meta[TRACESTATE] = tracestate
    else:
        meta.pop(TRACESTATE, None)
    out["_meta"] = meta
    return out


def headers_of(message: Any) -> dict[str, str]:
    """The HTTP headers that mirror a request's _meta trace context (an HTTP upstream reads either)."""
    params = message.get("params") if type(message) is dict else None
    meta = params.get("_meta") if type(params) is dict else None
    if type(meta) is not dict or TRACEPARENT not in meta:
        return {}
    return carrier_of(params)


def header_into_meta(environ: Any, message: Any) -> None:
    """An HTTP front's request: its `traceparent` (and `tracestate`) headers become its
    _meta's when its _meta carries none, so the Session reads one place, whatever the front.
    A _meta traceparent wins: it is this message's own, the header the whole POST's."""
    parent = environ.get("HTTP_TRACEPARENT")
    if parent is None or type(message) is not dict or message.get("method") not in TRACED_METHODS \
            or "id" not in message or not valid_traceparent(parent):
        return
    params = message.get("params")
    if params is None:
        params = message["params"] = {}
    if type(params) is not dict:
        return
    meta = params.get("_meta")
    if meta is None:
        meta = params["_meta"] = {}
    if type(meta) is not dict or TRACEPARENT in meta:
        return
    meta[TRACEPARENT] = parent
    state = environ.get("HTTP_TRACESTATE")
    if valid_tracestate(state) and state:
        meta[TRACESTATE] = state
