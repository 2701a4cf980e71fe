"""The HTTP header rules of MCP 2026-07-28 (modern) requests: the routing headers must repeat the body.

Pure functions over a WSGI environ and a decoded request; no actor, no I/O. A disagreement is a
HeaderMismatch (JSON-RPC -32020, HTTP 400). The rules follow the spec's transport text and the
official Python SDK (mcp.shared.inbound), so a request one accepts the other accepts too.
"""
from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from actors.protocol.header_params import annotated, invalid_annotation
from actors.protocol.modern import META_VERSION

# Which body field each name-bearing method mirrors in Mcp-Name.
# (SEP-2663: a task request names its task, so that an intermediary routes it to the instance holding it.)
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri", "tasks/get": "taskId",
                "tasks/update": "taskId", "tasks/cancel": "taskId"}
# Of those, the methods whose Mcp-Name may be left out (checked only when sent): the SDK's client
# (and fastmcp-tasks' on it) names no task in a header, and FastMCP's server accepts that.
NAME_OPTIONAL = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
PARAM_PREFIX = "Mcp-Param-"

_B64 = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")
_DECIMAL = re.compile(r"^-?[0-9]+(\.[0-9]+)?$")


class HeaderMismatch(Exception):
    """A routing header disagrees with the body (or is missing): answered HEADER_MISMATCH (-32020), HTTP 400."""


# WSGI keys of the header names asked for: every modern request looks up five or six, and building
# each key anew was measurable per call. Names come from this code and from listed schemas' tokens;
# past the bound a key is built each time instead of kept.
_WSGI_KEYS: dict[str, str] = {}
_WSGI_KEYS_MAX = 4096
# x-mcp-header annotations per input schema: walking a tool's schema twice on every call was the
# costliest part of the header check. Catalogue snapshots are immutable, so a schema object's
# annotations never change; each entry holds its schema, so its id cannot be reused while cached.
_ANNOTATIONS: dict[int, tuple[Any, tuple | None]] = {}
_ANNOTATIONS_MAX = 16384  # beyond it the cache starts over (a catalogue that large still works)


def header(environ: Mapping, name: str) -> str | None:
    """A request header by its HTTP name, as WSGI spells it (HTTP_MCP_PROTOCOL_VERSION…)."""
    key = _WSGI_KEYS.get(name)
    if key is None:
        key = "HTTP_" + name.upper().replace("-", "_")
        if len(_WSGI_KEYS) < _WSGI_KEYS_MAX:
            _WSGI_KEYS[name] = key
    return environ.get(key)


def decode_value(value: str | None) -> str | None:
    """A header value, `=?base64?…?=` decoded (how non-ASCII travels); None for a malformed one,
    so that a corrupt header never matches the body by accident."""
    if value is None:
        return None
    found = _B64.fullmatch(value)
    if found is None:
        return value
    payload = found.group("payload")
    try:
        raw = base64.b64decode(payload, validate=True)
        if base64.b64encode(raw).decode("ascii") != payload:  # only canonical base64 is ever sent
            return None
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def check(environ: Mapping, msg: dict, input_schema: Any = None) -> None:
    """Raise HeaderMismatch unless MCP-Protocol-Version, Mcp-Method, Mcp-Name and the Mcp-Param-*
    headers of a modern request agree with its body. `input_schema` is the called tool's, as troupe
    lists it (None when unknown: then Mcp-Param-* headers are not checked).

    A body without `_meta.protocolVersion` is not checked here: the front answers -32602 for it
    first (modern.missing_envelope), as the spec checks the envelope's shape before the headers."""
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or META_VERSION not in meta:
        return
    if header(environ, "MCP-Protocol-Version") != meta[META_VERSION]:
        raise HeaderMismatch("MCP-Protocol-Version header does not match params._meta's protocol version")
    method = msg.get("method")
    if header(environ, "Mcp-Method") != method:
        raise HeaderMismatch("Mcp-Method header does not match the request's method")
    key = NAME_BEARING.get(method) if isinstance(method, str) else None
    assert isinstance(params, dict)  # it holds _meta
    if key is not None and params.get(key) is not None:
        sent = header(environ, "Mcp-Name")
        if not (sent is None and method in NAME_OPTIONAL) and decode_value(sent) != params[key]:
            raise HeaderMismatch(f"Mcp-Name header does not match the request's {key!r}")
    if method == "tools/call" and input_schema is not None:
        arguments = params.get("arguments")
        check_params(environ, input_schema, arguments if isinstance(arguments, dict) else {})


def check_params(environ: Mapping, input_schema: Any, arguments: Mapping) -> None:
    """Each property the tool marks with `x-mcp-header` and its Mcp-Param-<token> header must be
    present together and equal, or absent together (a null argument counts as absent). A schema
    with an invalid annotation checks nothing: conforming clients drop such a tool."""
    found = _annotations(input_schema)
    if not found:
        return
    for path, token, schema in found:
        name = PARAM_PREFIX + token
        raw = header(environ, name)
        value = _value_at(arguments, path)
        argument = ".".join(path)
        rendered = None if value is None else _render(value)
        if rendered is None:
            if raw is not None:
                raise HeaderMismatch(f"{name} header is present but argument {argument!r} is absent or not a scalar")
            continue
        if raw is None:
            raise HeaderMismatch(f"{name} header is missing but argument {argument!r} is present")
        decoded = decode_value(raw)
        if decoded is None:
            raise HeaderMismatch(f"{name} header carries a malformed base64 value")
        if not _matches(schema.get("type"), value, rendered, decoded):
            raise HeaderMismatch(f"{name} header does not match argument {argument!r}")


def _annotations(input_schema: Any) -> tuple | None:
    """The schema's (path, token, property schema) annotations, found once per schema object; None
    when they are invalid (the tool checks nothing)."""
    key = id(input_schema)
    hit = _ANNOTATIONS.get(key)
    if hit is not None and hit[0] is input_schema:
        return hit[1]
    found = None if invalid_annotation(input_schema) is not None else tuple(annotated(input_schema))
    if len(_ANNOTATIONS) >= _ANNOTATIONS_MAX:
        _ANNOTATIONS.clear()
    _ANNOTATIONS[key] = (input_schema, found)
    return found


def _value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _render(value: Any) -> str | None:
    """How a client writes an argument into its header: booleans as true/false, scalars as str."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        try:
            return str(value)
        except ValueError:  # an int past Python's digit limit has no rendering
            return None
    return None


def _matches(kind: Any, value: Any, rendered: str, decoded: str) -> bool:
    """Integers compare as numbers (42 matches 42.0, as the spec advises), the rest as text."""
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "integer" and not isinstance(value, bool) and integral and _DECIMAL.fullmatch(decoded):
        whole, _, fraction = decoded.partition(".")
        return (not fraction or set(fraction) == {"0"}) and int(whole) == int(value)
    return decoded == rendered
