"""Validate MCP JSON-RPC messages against the spec's published JSON Schema (2025-11-25 by default)."""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

from tests.support import ROOT

SHARED = Path(os.environ.get("TROUPE_SHARED_DIR", ROOT.parent / "shared"))
DEFAULT_VERSION = "2025-11-25"


@functools.cache
def load_schema(version: str = DEFAULT_VERSION) -> dict:
    path = SHARED / "mcp-spec" / version / "schema.json"
    if not path.exists():
        raise AssertionError(f"MCP schema not found at {path} (set TROUPE_SHARED_DIR?)")
    return orjson.loads(path.read_bytes())


def _defs(version: str) -> dict:
    schema = load_schema(version)
    # 2020-12 files keep types under $defs, the draft-07 ones under definitions.
    return schema.get("$defs") or schema["definitions"]


def _defs_key(version: str) -> str:
    return "$defs" if "$defs" in load_schema(version) else "definitions"


@functools.cache
def _validator(version: str, name: str):
    if name not in _defs(version):
        raise AssertionError(f"no type {name!r} in the {version} schema")
    doc = dict(load_schema(version))
    # Validate against one definition, with all the others in the same document for $ref.
    doc["$ref"] = f"#/{_defs_key(version)}/{name}"
    cls = Draft202012Validator if _defs_key(version) == "$defs" else validator_for(doc)
    return cls(doc)


@functools.cache
def _methods(version: str, union: str) -> dict[str, str]:
    """method -> type name for a union such as ClientRequest or ServerNotification."""
    defs, out = _defs(version), {}
    for ref in defs.get(union, {}).get("anyOf", []):
        name = ref["$ref"].rsplit("/", 1)[1]
        method = defs[name].get("properties", {}).get("method", {}).get("const")
        if method:
            out[method] = name
    return out


def _short(value: Any, limit: int = 400) -> str:
    text = orjson.dumps(value, default=repr).decode()
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def validate(instance: Any, type_name: str, version: str = DEFAULT_VERSION) -> None:
    """Assert instance matches the schema's type_name, e.g. 'CallToolResult'."""
    errors = list(_validator(version, type_name).iter_errors(instance))
    if not errors:
        return
    best = best_match(errors)
    lines = [f"not a valid {type_name} ({version}): {best.message[:300]}", f"  at {best.json_path}"]
    lines += [f"  - {e.json_path}: {e.message[:200]}" for e in errors[:5]]
    lines.append(f"  instance: {_short(instance)}")
    raise AssertionError("\n".join(lines))


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


def result_type(method: str, version: str = DEFAULT_VERSION) -> str:
    """Result type answering a request method: tools/list -> ListToolsResult, ping -> EmptyResult."""
    requests = {**_methods(version, "ServerRequest"), **_methods(version, "ClientRequest")}
    if method not in requests:
        raise AssertionError(f"unknown request method {method!r} in the {version} schema")
    name = requests[method][: -len("Request")] + "Result"
    return name if name in _defs(version) else "EmptyResult"


def validate_result(result: Any, method: str, version: str = DEFAULT_VERSION) -> str:
    """Validate the result of a `method` request; returns the type name used."""
    name = result_type(method, version)
    # A modern server may answer call/get/read with a request for more input instead.
    if isinstance(result, dict) and result.get("resultType") == "input_required" \
            and "InputRequiredResult" in _defs(version):
        name = "InputRequiredResult"
    validate(result, name, version)
    return name


def validate_message(msg: Any, direction: str = "server", method: str | None = None,
                     version: str = DEFAULT_VERSION) -> str:
    """Validate one message sent by `direction` ('server' or 'client'); returns the type name used.

    For a result response, pass `method` (of the request it answers) to check the result's type too.
    """
    assert direction in ("server", "client"), f"direction must be 'server' or 'client', not {direction!r}"
    kind = classify(msg)
    sender, other = ("Server", "Client") if direction == "server" else ("Client", "Server")
    if kind in ("request", "notification"):
        union = "Request" if kind == "request" else "Notification"
        name = _methods(version, sender + union).get(msg["method"])
        if name is None:
            assert msg["method"] not in _methods(version, other + union), \
                f"{msg['method']!r} is a {other.lower()} {kind}, not one a {direction} sends: {_short(msg)}"
            # Unknown (extension) methods can only be checked as plain JSON-RPC.
            name = "JSONRPCRequest" if kind == "request" else "JSONRPCNotification"
        validate(msg, name, version)
        return name
    names = ("JSONRPCResultResponse", "JSONRPCResponse") if kind == "result" \
        else ("JSONRPCErrorResponse", "JSONRPCError")
    envelope = next(n for n in names if n in _defs(version))
    validate(msg, envelope, version)
    if kind == "result" and method is not None:
        return validate_result(msg["result"], method, version)
    return envelope
