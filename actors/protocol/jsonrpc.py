"""JSON-RPC 2.0 framing with orjson: encode, decode, classify, build replies."""
from __future__ import annotations

from typing import Any

import orjson

from actors.protocol.depth import MAX_DEPTH, answer_id, too_deep

MIN_TOO_DEEP = 2 * (MAX_DEPTH + 1)  # bytes a text needs to nest MAX_DEPTH + 1 levels: a bracket each way

# Standard JSON-RPC error codes, named so no literal code appears elsewhere.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# MCP: resource not found (legacy era).
RESOURCE_NOT_FOUND = -32002
# troupe's own, outside the spec's reserved -32020..-32099 range.
REQUEST_TIMEOUT = -32001
SERVER_UNAVAILABLE = -32000
# A client past one of its rate limits (actors/ratelimit): refused at once, never queued; its data
# says which limit and when to retry (retry_after_s). Over stateless HTTP also 429 + Retry-After.
RATE_LIMITED = -32003


def encode(message: dict | list) -> bytes:
    """One message as compact JSON bytes, no newline."""
    return orjson.dumps(message)


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH levels, refused where it was parsed. `message_id` is the
    message's id when it could be read (None otherwise); `answer` says whether the message is a
    response (no `method`), so that an upstream's too-deep answer fails the request it answers."""

    def __init__(self, message_id: Any = None, answer: bool = False) -> None:
        super().__init__(f"JSON nested deeper than {MAX_DEPTH} levels refused")
        self.message_id, self.answer = message_id, answer


def decode(data: bytes | bytearray | str) -> Any:
    """Parse one message; raises TooDeep past MAX_DEPTH levels, ValueError (orjson.JSONDecodeError)
    on bad JSON."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit exceeded"):  # orjson's own limit, 1,024 levels
            found = answer_id(data)
            raise TooDeep(found, found is not None) from None
        raise
    if len(data) > MIN_TOO_DEEP and too_deep(data, value):  # shorter ones cannot be: not even a call on them
        if isinstance(value, dict):
            raise TooDeep(value.get("id"), "method" not in value)
        raise TooDeep()
    return value


def is_request(msg: dict) -> bool:
    return "method" in msg and "id" in msg


def is_notification(msg: dict) -> bool:
    return "method" in msg and "id" not in msg


def is_response(msg: dict) -> bool:
    return "method" not in msg and ("result" in msg or "error" in msg)


def request(id_: Any, method: str, params: dict | None = None) -> dict:
    msg = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def notification(method: str, params: dict | None = None) -> dict:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    return msg


def result(id_: Any, value: dict) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def error(id_: Any, code: int, message: str, data: Any = None) -> dict:
    err = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    if id_ is None:  # the request's id could not be read: MCP omits it rather than send null
        return {"jsonrpc": "2.0", "error": err}
    return {"jsonrpc": "2.0", "id": id_, "error": err}
