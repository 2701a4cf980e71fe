"""A raw JSON-RPC stdio server (no SDK) with the 2025-11-25 revision's experimental `tasks`
utility, as that revision specifies it: capability `tasks {list, cancel, requests.tools.call}`,
tools with `execution.taskSupport`, `tools/call` with `params.task {ttl}` answered by
`CreateTaskResult {task}`, `tasks/get`, `tasks/result` (blocks until terminal; the result carries
`_meta["io.modelcontextprotocol/related-task"]`), `tasks/list` (cursor pages of
LEGACY_TASKS_PAGE, default 2), `tasks/cancel`, and `notifications/tasks/status` on every change
after creation.

Tools: `slow_add(a, b, seconds)` (taskSupport optional), `must_task(text, seconds)` (required),
`ask_name()` (required: input_required, then `elicitation/create` with related-task `_meta` once
the client's `tasks/result` for it is pending), `wait_forever()` (optional; runs until
cancelled), `broken()` (optional; an isError result, so its task ends `failed`), `shout(text)`
(forbidden), `echo(text)` (no `execution`), `cancelled_count()` (no `execution`). A cancelled task
appends a line to the file named by TASKS_CANCEL_MARKER, if set."""
from __future__ import annotations

import base64
import datetime
import itertools
import json
import os
import secrets
import sys
import threading
from typing import Any

VERSION = "2025-11-25"
RELATED = "io.modelcontextprotocol/related-task"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32601, -32602, -32603
DEFAULT_TTL_MS, MAX_TTL_MS = 60_000, 3_600_000
POLL_INTERVAL_MS = 200
PAGE = int(os.environ.get("LEGACY_TASKS_PAGE", "2"))

CAPABILITIES = {"tools": {}, "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}


def _schema(**props: str) -> dict:
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()},
            "required": [k for k in props if k != "seconds"]}


def _tool(name: str, description: str, support: str | None, **props: str) -> dict:
    tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": _schema(**props)}
    if support is not None:
        tool["execution"] = {"taskSupport": support}
    return tool


TOOLS = [
    _tool("slow_add", "Sleep `seconds`, then return a + b.", "optional", a="integer", b="integer", seconds="number"),
    _tool("must_task", "Only runs as a task: says the text back after `seconds`.", "required",
          text="string", seconds="number"),
    _tool("ask_name", "Ask the client for a name mid-task, then greet it.", "required"),
    _tool("wait_forever", "Run until cancelled.", "optional"),
    _tool("broken", "A tool whose result is an error.", "optional"),
    _tool("shout", "Upper-case the text (never a task).", "forbidden", text="string"),
    _tool("echo", "Say the text back.", None, text="string"),
    _tool("cancelled_count", "How many tasks were cancelled.", None),
]
SUPPORT = {t["name"]: t.get("execution", {}).get("taskSupport", "forbidden") for t in TOOLS}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def _text(text: str, is_error: bool = False) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


class Failure(Exception):
    """A JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Task:
    """One task: its wire state, its outcome, and the events its worker and waiters use."""

    def __init__(self, tool: str, arguments: dict, ttl: int | None) -> None:
        self.id = secrets.token_urlsafe(24)  # unguessable: this server binds tasks to no caller
        self.tool, self.arguments = tool, arguments
        self.status = "working"
        self.message: str | None = None
        self.created = self.updated = _now()
        self.ttl = min(ttl, MAX_TTL_MS) if isinstance(ttl, int) else DEFAULT_TTL_MS
        self.outcome: dict | None = None  # {"result": ...} or {"error": ...}
        self.cancelled = threading.Event()
        self.result_waiters = 0  # tasks/result requests pending for this task

    def wire(self) -> dict:
        """The Task object of the 2025-11-25 schema."""
        task = {"taskId": self.id, "status": self.status, "createdAt": self.created,
                "lastUpdatedAt": self.updated, "ttl": self.ttl, "pollInterval": POLL_INTERVAL_MS}
        if self.message:
            task["statusMessage"] = self.message
        return task


class Server:
    """The server's state: tasks by id (in creation order), requests it sent awaiting answers."""

    def __init__(self) -> None:
        self.out_lock = threading.Lock()
        self.cond = threading.Condition()  # guards tasks, their status and outcome, and `answers`
        self.tasks: dict[str, Task] = {}
        self.answers: dict[str, dict] = {}
        self.ids = itertools.count(1)
        self.cancelled_total = 0

    # -- output -------------------------------------------------------------------------
    def write(self, message: dict) -> None:
        with self.out_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def reply(self, rid: Any, result: dict | None = None, error: Failure | None = None) -> None:
        if error is not None:
            self.write({"jsonrpc": "2.0", "id": rid, "error": {"code": error.code, "message": str(error)}})
        else:
            self.write({"jsonrpc": "2.0", "id": rid, "result": result})

    # -- task state ---------------------------------------------------------------------
    def set_status(self, task: Task, status: str, message: str | None = None,
                   outcome: dict | None = None) -> bool:
        """Move a task on and tell the client; a terminal task never moves again."""
        with self.cond:
            if task.status in TERMINAL:
                return False
            task.status, task.message, task.updated = status, message, _now()
            if outcome is not None:
                task.outcome = outcome
            wire = task.wire()
            self.cond.notify_all()
        self.write({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": wire})
        return True

    def find(self, params: dict) -> Task:
        task = self.tasks.get(params.get("taskId"))  # type: ignore[arg-type]
        if task is None:
            raise Failure(INVALID_PARAMS, "Failed to retrieve task: Task not found")
        return task

    # -- server-to-client requests ------------------------------------------------------
    def ask(self, method: str, params: dict, stop: threading.Event) -> dict:
        """Send a request to the client and wait for its answer (or for `stop`: then {})."""
        rid = f"srv-{next(self.ids)}"
        self.write({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        with self.cond:
            while rid not in self.answers and not stop.is_set():
                self.cond.wait(0.1)
            return self.answers.pop(rid, {})

    # -- tools --------------------------------------------------------------------------
    def run_tool(self, name: str, args: dict, task: Task | None) -> dict:
        """The tool's CallToolResult; a task-less call runs the same code in the caller's thread."""
        stop = task.cancelled if task else threading.Event()
        if name == "slow_add":
            stop.wait(float(args.get("seconds", 1.0)))
            return _text(str(int(args["a"]) + int(args["b"])))
        if name == "must_task":
            stop.wait(float(args.get("seconds", 0.0)))
            return _text(f"done: {args.get('text', '')}")
        if name == "ask_name":
            return self.ask_name(task)
        if name == "wait_forever":
            stop.wait()
            return _text("stopped")
        if name == "broken":
            return _text("this tool always fails", is_error=True)
        if name in ("shout", "echo"):
            text = str(args.get("text", ""))
            return _text(text.upper() if name == "shout" else text)
        if name == "cancelled_count":
            return _text(str(self.cancelled_total))
        raise Failure(INVALID_PARAMS, f"Unknown tool: {name}")

    def ask_name(self, task: Task | None) -> dict:
        assert task is not None  # taskSupport "required": never called without a task
        self.set_status(task, "input_required", "waiting for a name")
        # Per the revision: the request goes out while the client's tasks/result is pending.
        with self.cond:
            while task.result_waiters == 0 and not task.cancelled.is_set():
                self.cond.wait(0.1)
        if task.cancelled.is_set():
            return _text("cancelled")
        answer = self.ask("elicitation/create", {
            "mode": "form", "message": "What is your name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
            "_meta": {RELATED: {"taskId": task.id}}}, task.cancelled)
        self.set_status(task, "working")
        result = answer.get("result") or {}
        if result.get("action") != "accept":
            return _text(f"no name ({result.get('action') or 'error'})")
        return _text(f"hello {(result.get('content') or {}).get('name')}")

    def work(self, task: Task) -> None:
        """A task's worker thread: run the tool, then record the outcome unless cancelled first."""
        try:
            result = self.run_tool(task.tool, task.arguments, task)
        except Failure as exc:
            self.set_status(task, "failed", str(exc), {"error": {"code": exc.code, "message": str(exc)}})
            return
        except Exception as exc:  # a bug in a tool: the task fails, the server lives on
            self.set_status(task, "failed", repr(exc), {"error": {"code": INTERNAL_ERROR, "message": repr(exc)}})
            return
        # 2025-11-25: a tool result with isError ends the task `failed`; tasks/result still returns it.
        status = "failed" if result.get("isError") else "completed"
        self.set_status(task, status, "tool reported an error" if status == "failed" else None,
                        {"result": result})

    # -- methods ------------------------------------------------------------------------
    def tools_call(self, rid: Any, params: dict) -> None:
        name, args = params.get("name"), params.get("arguments") or {}
        support = SUPPORT.get(name)  # type: ignore[arg-type]
        if support is None:
            raise Failure(INVALID_PARAMS, f"Unknown tool: {name}")
        augment = params.get("task")
        if augment is not None and support == "forbidden":
            raise Failure(METHOD_NOT_FOUND, f"Tool {name} does not support task execution")
        if augment is None and support == "required":
            raise Failure(METHOD_NOT_FOUND, f"Tool {name} must be called as a task")
        if augment is None:
            self.reply(rid, self.run_tool(name, args, None))  # type: ignore[arg-type]
            return
        task = Task(name, args, (augment or {}).get("ttl"))  # type: ignore[arg-type]
        with self.cond:
            self.tasks[task.id] = task
        self.reply(rid, {"task": task.wire()})
        threading.Thread(target=self.work, args=(task,), daemon=True).start()

    def tasks_result(self, rid: Any, params: dict) -> None:
        task = self.find(params)
        with self.cond:
            task.result_waiters += 1
            self.cond.notify_all()
            while task.status not in TERMINAL:
                self.cond.wait(0.1)
            task.result_waiters -= 1
            outcome = task.outcome or {"result": _text("Task was cancelled", is_error=True)}
        if "error" in outcome:
            self.write({"jsonrpc": "2.0", "id": rid, "error": outcome["error"]})
            return
        result = dict(outcome["result"])
        result["_meta"] = {**result.get("_meta", {}), RELATED: {"taskId": task.id}}
        self.reply(rid, result)

    def tasks_list(self, params: dict) -> dict:
        cursor = params.get("cursor")
        try:
            start = int(base64.urlsafe_b64decode(cursor.encode()).decode()) if cursor else 0
        except (ValueError, UnicodeDecodeError, AttributeError):
            raise Failure(INVALID_PARAMS, "Invalid cursor") from None
        with self.cond:
            every = [t.wire() for t in self.tasks.values()]
        if start < 0 or start > len(every):
            raise Failure(INVALID_PARAMS, "Invalid cursor")
        page: dict[str, Any] = {"tasks": every[start:start + PAGE]}
        if start + PAGE < len(every):
            page["nextCursor"] = base64.urlsafe_b64encode(str(start + PAGE).encode()).decode()
        return page

    def tasks_cancel(self, params: dict) -> dict:
        task = self.find(params)
        with self.cond:
            if task.status in TERMINAL:
                raise Failure(INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{task.status}'")
        # The revision: the task is `cancelled` before the answer goes out.
        if self.set_status(task, "cancelled", "The task was cancelled by request."):
            self.cancelled_total += 1
            marker = os.environ.get("TASKS_CANCEL_MARKER")
            if marker:
                with open(marker, "a", encoding="utf-8") as f:
                    f.write(f"{task.id}\n")
        task.cancelled.set()
        with self.cond:
            return task.wire()

    def handle(self, message: dict) -> None:
        """Answer one request (in its own thread: tasks/result and sync tools block)."""
        rid, method, params = message.get("id"), message.get("method"), message.get("params") or {}
        try:
            if method == "initialize":
                self.reply(rid, {"protocolVersion": VERSION, "capabilities": CAPABILITIES,
                                 "serverInfo": {"name": "legacy-tasks", "version": "1.0.0"}})
            elif method == "ping":
                self.reply(rid, {})
            elif method == "tools/list":
                self.reply(rid, {"tools": TOOLS})
            elif method == "tools/call":
                self.tools_call(rid, params)
            elif method == "tasks/get":
                task = self.find(params)
                with self.cond:
                    self.reply(rid, task.wire())
            elif method == "tasks/result":
                self.tasks_result(rid, params)
            elif method == "tasks/list":
                self.reply(rid, self.tasks_list(params))
            elif method == "tasks/cancel":
                self.reply(rid, self.tasks_cancel(params))
            else:
                raise Failure(METHOD_NOT_FOUND, f"Method not found: {method}")
        except Failure as exc:
            self.reply(rid, error=exc)

    def serve(self) -> None:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                self.write({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                continue
            if "method" not in message:  # an answer to a request this server sent
                with self.cond:
                    self.answers[str(message.get("id"))] = message
                    self.cond.notify_all()
            elif "id" in message:
                threading.Thread(target=self.handle, args=(message,), daemon=True).start()
            # notifications (initialized, cancelled) need nothing from this server


if __name__ == "__main__":
    Server().serve()
