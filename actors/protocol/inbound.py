"""What a client sends, checked where it enters (every front calls `parse` or `check`): the JSON-RPC
shape and, for the methods troupe reads, the params it reads, per the MCP schema. A Session only
ever receives well-shaped messages; a malformed one fails alone, with an error naming the field
in JSON terms ("params.arguments must be an object, got array"), never a Python repr."""
from __future__ import annotations

from typing import Any, Callable

from loguru import logger

from actors.protocol import jsonrpc, mcp, modern

# A 2026-07-28 request's envelope names its version here (protocol.modern checks the envelope itself).
MODERN_VERSION_META = "io.modelcontextprotocol/protocolVersion"
_NO_PARAMS: dict = {}  # read, never written
_LIST_METHODS = frozenset(method for method, _ in mcp.LIST_METHODS.values())
_URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})


def json_type(value: Any) -> str:
    """A value's type as JSON names it (integer apart from number, as the MCP schema does)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def is_id(value: Any) -> bool:
    """A request id as MCP has it: a string or an integer (true is not 1)."""
    kind = type(value)
    return kind is str or kind is int or (isinstance(value, (str, int)) and not isinstance(value, bool))


def wrong(path: str, expected: str, value: Any) -> str:
    return f"{path} must be {expected}, got {json_type(value)}"


class Checked:
    """A client payload after the boundary: `message` goes on to the Session (None: nothing does),
    `answers` are troupe's own answers to the requests it refused, `batch` whether the payload
    was an array."""

    __slots__ = ("message", "answers", "batch")

    def __init__(self, message: Any = None, answers: list | None = None, batch: bool = False) -> None:
        self.message, self.answers, self.batch = message, answers if answers is not None else [], batch


def parse(data: bytes | bytearray | str, peer: str, max_batch: int | None = None) -> Checked:
    """Decode one payload (depth-bounded) and check it; bad JSON or too deep is answered here,
    and so is a batch of more than `max_batch` entries (serve.max_batch; None: no limit)."""
    try:
        value = jsonrpc.decode(data)
    except jsonrpc.TooDeep as exc:
        logger.debug("{}: refused a message: {}", peer, exc)
        rid = exc.message_id if is_id(exc.message_id) and not exc.answer else None
        return Checked(answers=[jsonrpc.error(rid, jsonrpc.INVALID_REQUEST, str(exc))])
    except ValueError as exc:
        return Checked(answers=[jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"parse error: {exc}")])
    return check(value, peer, max_batch)


def check(value: Any, peer: str, max_batch: int | None = None) -> Checked:
    """Check a decoded payload: one message, or a batch whose entries are checked one by one (the
    well-shaped ones go on together; the Session may still refuse batches for its version). A
    batch of more than `max_batch` entries is refused whole, with one error (not an array):
    serving 10,000 requests of one client at once would hold every other client behind them."""
    if not isinstance(value, list):
        message, answer = _one(value, peer)
        return Checked(message, [answer] if answer is not None else [])
    if not value:
        return Checked(answers=[jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "an empty batch")], batch=True)
    if max_batch is not None and len(value) > max_batch:
        logger.info("{}: refused a batch of {} messages (serve.max_batch is {})", peer, len(value), max_batch)
        return Checked(answers=[jsonrpc.error(None, jsonrpc.INVALID_REQUEST, (
            f"a batch of {len(value)} messages is over troupe's limit of {max_batch} (serve.max_batch); "
            f"send fewer at a time"))])
    kept, answers = [], []
    for entry in value:
        message, answer = _one(entry, peer)
        if message is not None:
            kept.append(message)
        if answer is not None:
            answers.append(answer)
    return Checked(kept or None, answers, batch=True)


def deliver(checked: Checked, sink: Callable[[Any], Any]) -> Callable[[Any], Any] | None:
    """Send troupe's own answers through `sink`; return the sink to hand the Session with
    `checked.message`, or None when nothing goes on. A batch's refused entries join the array the
    Session answers with (sent now when nothing in it awaits an answer)."""
    answers = checked.answers
    if not checked.batch:
        for answer in answers:
            sink(answer)
        return sink if checked.message is not None else None
    if checked.message is None or not answers:
        if answers:
            sink(answers)
        return sink if checked.message is not None else None
    if not any(_awaits_answer(m) for m in checked.message):
        sink(answers)
        return sink
    return merging(sink, answers)


def merging(sink: Callable[[Any], Any], answers: list) -> Callable[[Any], Any]:
    """A sink that puts `answers` ahead of the Session's answer array; anything else (notifications,
    the Session refusing the batch whole) passes unchanged."""
    def merged(message) -> Any:
        return sink(answers + message if isinstance(message, list) else message)
    return merged


def _awaits_answer(message: dict) -> bool:
    return "method" in message and "id" in message


def _one(msg: Any, peer: str) -> tuple[Any, dict | None]:
    """(what goes on to the Session, or None; troupe's answer, or None) for one message."""
    if not isinstance(msg, dict):
        return None, jsonrpc.error(None, jsonrpc.INVALID_REQUEST, f"expected a JSON-RPC object, got {json_type(msg)}")
    method = msg.get("method")
    if method is None and "method" not in msg:
        return _response(msg, peer)
    rid = msg.get("id")
    request = rid is not None or "id" in msg
    code = jsonrpc.INVALID_REQUEST
    if request and not is_id(rid):
        problem, rid = wrong("id", "a string or an integer", rid), None
    elif msg.get("jsonrpc") != "2.0":
        problem = 'jsonrpc must be "2.0"'
    elif type(method) is not str:
        problem = wrong("method", "a string", method)
    else:
        problem = params_problem(method, msg.get("params"))
        if problem is None:
            return msg, None  # the common case: one lookup per field troupe reads, no more
        code = jsonrpc.INVALID_PARAMS
    if not request:  # JSON-RPC answers no notification, not even a malformed one
        logger.debug("{}: dropped a notification: {}", peer, problem)
        return None, None
    logger.debug("{}: refused request {!r}: {}", peer, rid, problem)
    return None, jsonrpc.error(rid, code, problem)


def _response(msg: dict, peer: str) -> tuple[Any, dict | None]:
    """A client's answer to a request troupe relayed to it. A malformed one still answers that
    request, with an error saying what was wrong, so the server that asked is not left waiting."""
    rid = msg.get("id")
    if "result" not in msg and "error" not in msg:
        return None, jsonrpc.error(rid if is_id(rid) else None, jsonrpc.INVALID_REQUEST,
                                   "message has no method, result or error")
    if not is_id(rid):
        logger.debug("{}: dropped an answer whose id is {}", peer, json_type(rid))
        return None, None
    problem = response_problem(msg)
    if problem is None:
        return msg, None
    logger.info("{}: its answer to {!r} is malformed: {}", peer, rid, problem)
    return jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"the client's answer was malformed: {problem}"), None


def response_problem(msg: dict, strict: bool = True) -> str | None:
    """What is wrong with a response's envelope (it has result or error), or None. `strict` also
    holds it to `jsonrpc: "2.0"`, as troupe does its clients (upstreams that omit it have worked)."""
    if strict and msg.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "result" in msg and "error" in msg:
        return "a response has result or error, not both"
    if "error" in msg:
        error = msg["error"]
        if not isinstance(error, dict):
            return wrong("error", "an object", error)
        code, text = error.get("code"), error.get("message")
        if not isinstance(code, int) or isinstance(code, bool):
            return wrong("error.code", "an integer", code)
        if not isinstance(text, str):
            return wrong("error.message", "a string", text)
        return None
    return None if isinstance(msg["result"], dict) else wrong("result", "an object", msg["result"])


# ---------------------------------------------------------------- params, per method


def params_problem(method: str, params: Any) -> str | None:
    """What is wrong with a client's params for `method` (only what troupe reads), or None."""
    if params is None:
        params = _NO_PARAMS
    elif type(params) is not dict:
        return wrong("params", "an object", params)
    meta = params.get("_meta")
    if meta is not None:
        if type(meta) is not dict:
            return wrong("params._meta", "an object", meta)
        if "progressToken" in meta and not is_id(meta["progressToken"]):
            return wrong("params._meta.progressToken", "a string or an integer", meta["progressToken"])
        if MODERN_VERSION_META in meta:
            if method in modern.REMOVED:
                return None  # no such method in that era: the Session answers "method not found" (HTTP 404)
            problem = _round_problem(params)
            if problem is not None:
                return problem
    check = _BY_METHOD.get(method)
    return check(params) if check is not None else None


def _round_problem(params: dict) -> str | None:
    """A 2026-07-28 retry's round keys: requestState troupe will open, inputResponses it passes on."""
    state = params.get("requestState")
    if state is not None and not isinstance(state, str):
        return wrong("params.requestState", "a string", state)
    if state is not None and not (state.isascii() and state.isprintable()):
        return "params.requestState must be printable ASCII (as troupe issued it)"
    responses = params.get("inputResponses")
    if responses is not None:
        if not isinstance(responses, dict):
            return wrong("params.inputResponses", "an object", responses)
        for key, answer in responses.items():
            if not isinstance(answer, dict):
                return wrong(f"params.inputResponses.{key}", "an object", answer)
    return None


def _string(params: dict, key: str, required: bool = False) -> str | None:
    value = params.get(key)
    if type(value) is str:
        return None
    if value is None:
        return f"params.{key} is required (a string)" if required else None
    return None if isinstance(value, str) else wrong(f"params.{key}", "a string", value)


def _object(params: dict, key: str, path: str = "params") -> str | None:
    value = params.get(key)
    return None if value is None or isinstance(value, dict) else wrong(f"{path}.{key}", "an object", value)


def _initialize(params: dict) -> str | None:
    return _string(params, "protocolVersion") or _object(params, "capabilities") or _object(params, "clientInfo")


def _named(params: dict) -> str | None:  # tools/call and prompts/get
    return _string(params, "name", required=True) or _object(params, "arguments")


def _uri(params: dict) -> str | None:
    return _string(params, "uri", required=True)


def _listing(params: dict) -> str | None:
    return _string(params, "cursor")


def _set_level(params: dict) -> str | None:
    level = params.get("level")
    return None if level in mcp.LOG_LEVELS else f"params.level must be one of {', '.join(mcp.LOG_LEVELS)}"


def _complete(params: dict) -> str | None:
    ref = params.get("ref")  # what troupe routes by; the rest is the server's to read
    if not isinstance(ref, dict):
        return wrong("params.ref", "an object", ref)
    if not isinstance(ref.get("type"), str):
        return wrong("params.ref.type", "a string", ref.get("type"))
    return _object(params, "argument")


def _listen(params: dict) -> str | None:
    wanted = params.get("notifications")
    return None if isinstance(wanted, dict) else wrong("params.notifications", "an object", wanted)


def _cancelled(params: dict) -> str | None:
    if not is_id(params.get("requestId")):
        return wrong("params.requestId", "a string or an integer", params.get("requestId"))
    return _string(params, "reason")


_BY_METHOD: dict[str, Callable[[dict], str | None]] = {
    "initialize": _initialize,
    "tools/call": _named,
    "prompts/get": _named,
    "logging/setLevel": _set_level,
    "completion/complete": _complete,
    "subscriptions/listen": _listen,
    "notifications/cancelled": _cancelled,
    **{method: _uri for method in _URI_METHODS},
    **{method: _listing for method in _LIST_METHODS},
}
