"""The two eras' task shapes and the conversions between them. Pure functions, no state.

troupe keeps every task in the modern shape (SEP-2663's DetailedTask: `ttlMs`, `pollIntervalMs`,
the result, error or inputRequests inlined) and turns it into the 2025-11-25 shape (`ttl`,
`pollInterval`, a CreateTaskResult wrapping `task`, results through tasks/result) for a client
or an upstream of that era. Everything a peer sends is checked here before troupe keeps it: a
task is state troupe serves to other requests later, so a wrong type must not get in.
"""
from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from actors.protocol import mcp

EXTENSION = mcp.TASKS_EXTENSION
RELATED_TASK = mcp.RELATED_TASK
SERVER_INFO = "io.modelcontextprotocol/serverInfo"  # a modern result's stamp of the server that made it
SERVERS_META = (RELATED_TASK, SERVER_INFO)  # `_meta` keys of a server's own that a task it runs never passes on
STATES = ("working", "input_required", "completed", "failed", "cancelled")
TERMINAL = frozenset({"completed", "failed", "cancelled"})
# The client-facing methods: SEP-2663's three, and the 2025-11-25 revision's four.
MODERN_METHODS = ("tasks/get", "tasks/update", "tasks/cancel")
LEGACY_METHODS = ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel")
METHODS = frozenset(MODERN_METHODS + LEGACY_METHODS)
NOTIFICATION = "notifications/tasks"  # SEP-2663, on a subscriptions/listen stream
LEGACY_NOTIFICATION = "notifications/tasks/status"  # 2025-11-25, on the session
# What troupe declares to a 2025-11-25 client: tools/call may be task-augmented, tasks listed and cancelled.
LEGACY_CAPABILITY = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
MAX_STATUS_MESSAGE = 1024  # characters of a server's statusMessage kept
MODERN, LEGACY = "modern", "legacy"


def now_iso() -> str:
    """An ISO 8601 timestamp in UTC, as tasks carry them."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------- who takes tasks


def server_form(capabilities: Any) -> str:
    """Which tasks a server creates, by its declared capabilities: MODERN (the extension, in its
    server/discover or initialize capabilities), LEGACY (2025-11-25's `tasks.requests.tools.call`)
    or "" (none: troupe mints tasks around its calls)."""
    if not isinstance(capabilities, Mapping):
        return ""
    extensions = capabilities.get("extensions")
    if isinstance(extensions, Mapping) and isinstance(extensions.get(EXTENSION), Mapping):
        return MODERN
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, Mapping) else None
    tools = requests.get("tools") if isinstance(requests, Mapping) else None
    if isinstance(tools, Mapping) and isinstance(tools.get("call"), Mapping):
        return LEGACY
    return ""


def client_declares_modern(capabilities: Any) -> bool:
    """A modern request's own capabilities name the tasks extension."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    return isinstance(extensions, Mapping) and isinstance(extensions.get(EXTENSION), Mapping)


def client_declares_legacy(capabilities: Any) -> bool:
    """A 2025-11-25 client's initialize capabilities say it may task-augment tools/call."""
    return server_form({"tasks": capabilities.get("tasks")} if isinstance(capabilities, Mapping) else None) == LEGACY


def tool_task_support(definition: Any) -> str:
    """A 2025-11-25 tool's `execution.taskSupport` ("forbidden" when absent or unknown)."""
    execution = definition.get("execution") if isinstance(definition, Mapping) else None
    support = execution.get("taskSupport") if isinstance(execution, Mapping) else None
    return support if support in ("optional", "required") else "forbidden"


def legacy_task_param(params: Mapping) -> dict | str | None:
    """A 2025-11-25 tools/call's `task` augmentation: None when absent, the checked object, or a
    string saying what is wrong with it."""
    if "task" not in params:
        return None
    task = params["task"]
    if not isinstance(task, dict):
        return "task must be an object"
    ttl = task.get("ttl")
    if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0):
        return "task.ttl must be a non-negative integer (milliseconds)"
    return {"ttl": ttl} if ttl is not None else {}


# ---------------------------------------------------------------- what an upstream sends


def task_of(outcome: Any, form: str) -> dict | str | None:
    """The task an upstream's answer to tools/call created, checked and in the modern shape;
    None when the answer is a plain result; a string when it is a malformed task."""
    if not isinstance(outcome, dict):
        return None
    if outcome.get("resultType") == "task":
        return checked(outcome)
    if form == LEGACY and "task" in outcome and "content" not in outcome:
        raw = outcome["task"]
        return checked(from_legacy(raw)) if isinstance(raw, dict) else "CreateTaskResult.task must be an object"
    return None


def checked(raw: Any) -> dict | str:
    """A peer's task (modern shape) with only the fields troupe serves, each of its type; a string
    naming the first wrong one. `result`, `error` and `inputRequests` are kept as given (objects)."""
    if not isinstance(raw, Mapping):
        return "a task must be an object"
    task_id, status = raw.get("taskId"), raw.get("status")
    if not isinstance(task_id, str) or not task_id or len(task_id) > 512:
        return "taskId must be a non-empty string (at most 512 characters)"
    if status not in STATES:
        return f"status must be one of {', '.join(STATES)}"
    out: dict = {"taskId": task_id, "status": status}
    for key in ("createdAt", "lastUpdatedAt"):
        value = raw.get(key)
        out[key] = value if isinstance(value, str) and len(value) <= 64 else now_iso()
    ttl = raw.get("ttlMs")
    out["ttlMs"] = ttl if _millis(ttl) else None
    poll = raw.get("pollIntervalMs")
    if _millis(poll):
        out["pollIntervalMs"] = poll
    message = raw.get("statusMessage")
    if isinstance(message, str):
        out["statusMessage"] = message[:MAX_STATUS_MESSAGE]
    for key in ("result", "error", "inputRequests"):
        if key in raw and not isinstance(raw[key], dict):
            return f"{key} must be an object"
    if "result" in raw:
        out["result"] = unrelated(raw["result"])
    if "error" in raw:
        out["error"] = error_of(raw["error"])
    if "inputRequests" in raw:
        out["inputRequests"] = {key: ({**request, "params": unrelated(request["params"])}
                                      if isinstance(request.get("params"), dict) else request)
                                for key, request in raw["inputRequests"].items() if isinstance(request, dict)}
    return out


def error_of(raw: Mapping) -> dict:
    """A peer's JSON-RPC error object with a code that is an integer and a message that is a
    string, whatever it sent (its data kept as given)."""
    code, message = raw.get("code"), raw.get("message")
    out: dict = {"code": code if isinstance(code, int) and not isinstance(code, bool) else -32603,
                 "message": message[:MAX_STATUS_MESSAGE * 4] if isinstance(message, str) else "the task failed"}
    if "data" in raw:
        out["data"] = raw["data"]
    return out


def _millis(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def from_legacy(task: Mapping) -> dict:
    """A 2025-11-25 Task in the modern shape (`ttl` → `ttlMs`, `pollInterval` → `pollIntervalMs`)."""
    out = {k: v for k, v in task.items() if k not in ("ttl", "pollInterval")}
    if "ttl" in task:
        out["ttlMs"] = task["ttl"]
    if "pollInterval" in task:
        out["pollIntervalMs"] = task["pollInterval"]
    return out


# ---------------------------------------------------------------- what a client is sent


def to_legacy(task: Mapping) -> dict:
    """A task as a 2025-11-25 Task: its own fields only (the result comes through tasks/result)."""
    out = {k: task[k] for k in ("taskId", "status", "statusMessage", "createdAt", "lastUpdatedAt") if k in task}
    out["ttl"] = task.get("ttlMs")
    if "pollIntervalMs" in task:
        out["pollInterval"] = task["pollIntervalMs"]
    return out


def created(task: Mapping, legacy: bool) -> dict:
    """The CreateTaskResult a tools/call is answered with: SEP-2663's (`resultType: "task"` and the
    task's own fields), or 2025-11-25's (`{task: Task}`)."""
    if legacy:
        return {"task": to_legacy(task)}
    return {"resultType": "task", **{k: v for k, v in task.items() if k not in ("result", "error", "inputRequests")}}


def detailed(task: Mapping, legacy: bool) -> dict:
    """tasks/get's answer: the whole DetailedTask (modern), or the Task alone (2025-11-25)."""
    if legacy:
        return to_legacy(task)
    return {**task, "resultType": "complete"}


def unrelated(message: dict) -> dict:
    """A server's result or request params without its related-task key, which names the task by
    the server's own id (troupe's clients know it by troupe's), nor its serverInfo stamp (troupe is
    the server its clients talk to, as every plain result says); the same object when it has neither."""
    meta = message.get("_meta")
    if not isinstance(meta, dict) or not any(key in meta for key in SERVERS_META):
        return message
    rest = {k: v for k, v in meta.items() if k not in SERVERS_META}
    out = {k: v for k, v in message.items() if k != "_meta"}
    if rest:
        out["_meta"] = rest
    return out


def with_related(result: dict, task_id: str) -> dict:
    """A task's result as tasks/result returns it (2025-11-25): tied to its task by troupe's id."""
    out = dict(result)
    out["_meta"] = {**(result.get("_meta") or {}), **related(task_id)}
    return out


def related(task_id: str) -> dict:
    """The `_meta` entry tying a 2025-11-25 message to its task."""
    return {RELATED_TASK: {"taskId": task_id}}
