"""What an upstream server sends, checked where it enters its Connection: an answer against the
method it answers (the fields troupe reads, per the MCP schema), a server's own request or
notification against its method. A problem is told in JSON terms, naming the field; the
Connection fails that one request with it (or refuses the server's request), nothing else."""
from __future__ import annotations

from typing import Callable

from actors.protocol.inbound import is_id, response_problem, wrong

INPUT_REQUIRED = "input_required"  # a 2026-07-28 result asking the client for input first


def answer_problem(msg: dict, method: str) -> str | None:
    """What is wrong with a server's answer to our `method` request, or None if troupe can read it."""
    result = msg.get("result")
    if type(result) is not dict or "error" in msg:
        if "result" not in msg and "error" not in msg:
            return "a response needs result or error"
        return response_problem(msg, strict=False)
    meta, kind = result.get("_meta"), result.get("resultType")
    if meta is not None and type(meta) is not dict:
        return wrong("result._meta", "an object", meta)
    if kind is not None:
        if type(kind) is not str:
            return wrong("result.resultType", "a string", kind)
        if kind == INPUT_REQUIRED:
            return _input_required(result)
    check = _RESULTS.get(method)
    return check(result) if check is not None else None


def message_problem(msg: dict) -> str | None:
    """What is wrong with a server's request or notification (its method a string already), or None."""
    params = msg.get("params")
    if params is None:
        params = {}
    elif not isinstance(params, dict):
        return wrong("params", "an object", params)
    check = _MESSAGES.get(msg["method"])
    return check(params) if check is not None else None


# ---------------------------------------------------------------- helpers


def _optional(body: dict, key: str, kind: type | tuple, expected: str, path: str) -> str | None:
    """A field that may be absent (or null, as some servers write absent), else of `kind`."""
    value = body.get(key)
    if value is None or (isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)):
        return None
    return wrong(f"{path}.{key}", expected, value)


def _items(key: str, named: str | None = None) -> Callable[[dict], str | None]:
    """result[key], if present, an array of objects (each with a string `named`, if given)."""
    def check(result: dict) -> str | None:
        items = result.get(key)
        if items is None:
            return None
        if not isinstance(items, list):
            return wrong(f"result.{key}", "an array", items)
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                return wrong(f"result.{key}[{i}]", "an object", item)
            if named is not None and not isinstance(item.get(named), str):
                return wrong(f"result.{key}[{i}].{named}", "a string", item.get(named))
        return None
    return check


def _listing(key: str, named: str) -> Callable[[dict], str | None]:
    items = _items(key, named)
    return lambda result: items(result) or _optional(result, "nextCursor", str, "a string", "result")


def _input_required(result: dict) -> str | None:
    requests = result.get("inputRequests")
    if requests is not None:
        if not isinstance(requests, dict):
            return wrong("result.inputRequests", "an object", requests)
        for key, request in requests.items():
            path = f"result.inputRequests.{key}"
            if not isinstance(request, dict):
                return wrong(path, "an object", request)
            if not isinstance(request.get("method"), str):
                return wrong(f"{path}.method", "a string", request.get("method"))
            problem = _optional(request, "params", dict, "an object", path)
            if problem is not None:
                return problem
    return _optional(result, "requestState", str, "a string", "result")


def _initialize(result: dict) -> str | None:
    return (_optional(result, "protocolVersion", str, "a string", "result")
            or _optional(result, "capabilities", dict, "an object", "result")
            or _optional(result, "serverInfo", dict, "an object", "result")
            or _optional(result, "instructions", str, "a string", "result"))


def _discover(result: dict) -> str | None:
    versions = result.get("supportedVersions")
    if versions is not None and not (isinstance(versions, list) and all(isinstance(v, str) for v in versions)):
        return "result.supportedVersions must be an array of strings"
    return _optional(result, "capabilities", dict, "an object", "result")


def _tool_result(result: dict) -> str | None:
    # structuredContent is not read here: 2026-07-28 allows any JSON value, and a legacy client
    # gets only an object (actors/protocol/eras.py: for_legacy)
    return _CONTENT(result) or _optional(result, "isError", bool, "a boolean", "result")


_CONTENT = _items("content")


def _completion(result: dict) -> str | None:
    completion = result.get("completion")
    if not isinstance(completion, dict):
        return wrong("result.completion", "an object", completion)
    values = completion.get("values")
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return "result.completion.values must be an array of strings"
    return None


_RESULTS: dict[str, Callable[[dict], str | None]] = {
    "initialize": _initialize,
    "server/discover": _discover,
    "tools/list": _listing("tools", "name"),
    "resources/list": _listing("resources", "uri"),
    "resources/templates/list": _listing("resourceTemplates", "uriTemplate"),
    "prompts/list": _listing("prompts", "name"),
    "resources/read": _items("contents"),
    "prompts/get": _items("messages"),
    "tools/call": _tool_result,
    "completion/complete": _completion,
}


# ---------------------------------------------------------------- a server's own messages


def _progress(params: dict) -> str | None:
    if not is_id(params.get("progressToken")):
        return wrong("params.progressToken", "a string or an integer", params.get("progressToken"))
    progress = params.get("progress")
    if not isinstance(progress, (int, float)) or isinstance(progress, bool):
        return wrong("params.progress", "a number", progress)
    return _optional(params, "total", (int, float), "a number", "params") or \
        _optional(params, "message", str, "a string", "params")


def _log(params: dict) -> str | None:
    if not isinstance(params.get("level"), str):
        return wrong("params.level", "a string", params.get("level"))
    return _optional(params, "logger", str, "a string", "params")


def _updated(params: dict) -> str | None:
    return None if isinstance(params.get("uri"), str) else wrong("params.uri", "a string", params.get("uri"))


def _cancelled(params: dict) -> str | None:
    if not is_id(params.get("requestId")):
        return wrong("params.requestId", "a string or an integer", params.get("requestId"))
    return _optional(params, "reason", str, "a string", "params")


def _elicit(params: dict) -> str | None:
    return _optional(params, "message", str, "a string", "params") or \
        _optional(params, "requestedSchema", dict, "an object", "params")


def _sample(params: dict) -> str | None:
    return _optional(params, "messages", list, "an array", "params")


_MESSAGES: dict[str, Callable[[dict], str | None]] = {
    "notifications/progress": _progress,
    "notifications/message": _log,
    "notifications/resources/updated": _updated,
    "notifications/cancelled": _cancelled,
    "elicitation/create": _elicit,
    "sampling/createMessage": _sample,
}
