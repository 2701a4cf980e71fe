"""Validate MCP JSON-RPC messages against the Python SDK's own wire types (`mcp.types`), per protocol era.

The SDK keeps one pydantic model per spec type and protocol version in the maps of
`mcp.types.methods` (keyed by `(method, version)`): the 2025-11-25 shapes for every
handshake version, the 2026-07-28 shapes for the stateless era. The envelopes come from
the same era's models as the methods (JSONRPCRequest, JSONRPCResultResponse, ...): they follow
the spec where the SDK's era-free `mcp.types.JSONRPCError` does not (an error's id is optional).
Validation is strict (no coercion of "1" to 1 or "true" to True) and by wire name only
(`inputSchema`, never `input_schema`), so a wrong type or a missing field fails.
"""
from __future__ import annotations

import functools
import sys
from types import UnionType
from typing import Any, get_args

import orjson
from mcp.types import methods
from mcp.types.version import KNOWN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError

DEFAULT_VERSION = "2025-11-25"

# (sender, kind) -> the SDK map of the types that sender may send, keyed by (method, version).
_SURFACES = {
    ("client", "request"): methods.CLIENT_REQUESTS,
    ("server", "request"): methods.SERVER_REQUESTS,
    ("client", "notification"): methods.CLIENT_NOTIFICATIONS,
    ("server", "notification"): methods.SERVER_NOTIFICATIONS,
}


def _check_version(version: str) -> None:
    assert version in KNOWN_PROTOCOL_VERSIONS, \
        f"unknown protocol version {version!r}; the SDK knows {', '.join(KNOWN_PROTOCOL_VERSIONS)}"


def _arms(model: type[BaseModel] | UnionType) -> tuple[type[BaseModel], ...]:
    return get_args(model) if isinstance(model, UnionType) else (model,)


def _name(model: type[BaseModel] | UnionType) -> str:
    """Spec name of a model; a union (2026's CallToolResult | InputRequiredResult) is named by its first arm."""
    name = _arms(model)[0].__name__
    return "EmptyResult" if name == "Result" else name  # the SDK spells EmptyResult as an alias of Result


@functools.cache
def _adapter(model: Any) -> TypeAdapter:
    return TypeAdapter(model)


@functools.cache
def _era(version: str):
    """The SDK's module of wire models for `version`'s era, reached through a type its public maps hold."""
    return sys.modules[methods.SERVER_RESULTS[("tools/list", version)].__module__]


def _model_named(type_name: str, version: str) -> type[BaseModel] | UnionType | None:
    model = getattr(_era(version), type_name, None)
    ok = isinstance(model, UnionType) or (isinstance(model, type) and issubclass(model, BaseModel))
    return model if ok else None


def _short(value: Any, limit: int = 400) -> str:
    text = orjson.dumps(value, default=repr).decode()
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def _where(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(top)"


def _check(instance: Any, model: type[BaseModel] | UnionType, name: str, version: str) -> None:
    try:
        # strict: no type coercion; by_alias only: fields must carry their wire names.
        _adapter(model).validate_python(instance, strict=True, by_alias=True, by_name=False)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        first = errors[0]
        lines = [f"not a valid {name} ({version}): {_where(first['loc'])}: {first['msg']}"]
        lines += [f"  - {_where(e['loc'])}: {e['msg'][:200]}" for e in errors[1:6]]
        lines.append(f"  instance: {_short(instance)}")
        raise AssertionError("\n".join(lines)) from None


def validate(instance: Any, type_name: str, version: str = DEFAULT_VERSION) -> None:
    """Assert instance matches the SDK's model for type_name at `version`, e.g. 'CallToolResult'."""
    _check_version(version)
    model = _model_named(type_name, version)
    if model is None:
        raise AssertionError(f"no type {type_name!r} for {version} in mcp.types")
    _check(instance, model, type_name, version)


def classify(msg: Any) -> str:
    """'request', 'notification', 'result' or 'error'; AssertionError for anything else."""
    assert isinstance(msg, dict), f"a JSON-RPC message must be an object, got {_short(msg)}"
    if "method" in msg:
        if "id" in msg:
            assert msg["id"] is not None, f"request id must not be null: {_short(msg)}"
            return "request"
        return "notification"
    assert ("result" in msg) != ("error" in msg), \
        f"a response needs exactly one of result/error: {_short(msg)}"
    assert msg.get("id", 0) is not None, f"response id must not be null: {_short(msg)}"
    return "result" if "result" in msg else "error"


def _result_model(method: str, version: str) -> type[BaseModel] | UnionType:
    _check_version(version)
    model = methods.SERVER_RESULTS.get((method, version)) or methods.CLIENT_RESULTS.get((method, version))
    if model is None:
        raise AssertionError(f"unknown request method {method!r} at {version} in mcp.types")
    return model


def result_type(method: str, version: str = DEFAULT_VERSION) -> str:
    """Result type answering a request method: tools/list -> ListToolsResult, ping -> EmptyResult."""
    return _name(_result_model(method, version))


def validate_result(result: Any, method: str, version: str = DEFAULT_VERSION) -> str:
    """Validate the result of a `method` request; returns the type name used."""
    model = _result_model(method, version)
    arms = _arms(model)
    # A 2026 server may answer call/get/read with a request for more input instead.
    if len(arms) > 1 and isinstance(result, dict) and result.get("resultType") == "input_required":
        model = next((a for a in arms if a.__name__ == "InputRequiredResult"), model)
    elif len(arms) > 1:
        model = arms[0]
    name = _name(model)
    _check(result, model, name, version)
    return name


def validate_message(msg: Any, direction: str = "server", method: str | None = None,
                     version: str = DEFAULT_VERSION) -> str:
    """Validate one message sent by `direction` ('server' or 'client'); returns the type name used.

    For a result response, pass `method` (of the request it answers) to check the result's type too.
    """
    assert direction in ("server", "client"), f"direction must be 'server' or 'client', not {direction!r}"
    _check_version(version)
    kind = classify(msg)
    other = "client" if direction == "server" else "server"
    if kind in ("request", "notification"):
        model = _SURFACES[(direction, kind)].get((msg["method"], version))
        if model is None:
            assert (msg["method"], version) not in _SURFACES[(other, kind)], \
                f"{msg['method']!r} is a {other} {kind}, not one a {direction} sends: {_short(msg)}"
            # Unknown (extension) methods can only be checked as plain JSON-RPC.
            name = "JSONRPCRequest" if kind == "request" else "JSONRPCNotification"
            validate(msg, name, version)
            return name
        name = _name(model)
        _check(msg, model, name, version)
        return name
    envelope = "JSONRPCResultResponse" if kind == "result" else "JSONRPCErrorResponse"
    validate(msg, envelope, version)
    if kind == "result" and method is not None:
        return validate_result(msg["result"], method, version)
    return envelope
