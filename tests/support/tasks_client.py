"""Drive MCP tasks through an endpoint as a real client would: raw JSON-RPC over stdio, raw
2026-07-28 JSON-RPC over Streamable HTTP (with the SEP's Mcp-Method / Mcp-Name headers),
FastMCP's client with fastmcp-tasks, and the official SDK's Client with a tasks extension."""
from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

from tests.support import wait_until as _wait_until

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TASKS_EXT = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: How long one request may take before a helper gives up (a test's own bound).
REQUEST_TIMEOUT = 20.0
#: How often the polling helpers ask again (they always stop at their deadline).
POLL_EVERY = 0.05


def modern_meta(tasks: bool = True, capabilities: dict | None = None) -> dict:
    """The per-request `_meta` of a 2026-07-28 client, declaring the tasks extension or not (and
    `capabilities` beside it: elicitation, say)."""
    caps: dict = {"extensions": {TASKS_EXT: {}}} if tasks else {}
    caps.update(capabilities or {})
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"}}


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """tests.support.wait_until, with the bound and the description said positionally."""
    return _wait_until(check, timeout, POLL_EVERY, what)


def marker_has(path, line: str) -> bool:
    """Whether the marker file a test server appends to (TASKS_CANCEL_MARKER) holds `line`."""
    try:
        with open(path, encoding="utf-8") as f:
            return line in f.read().splitlines()
    except FileNotFoundError:
        return False


class RawStdio:
    """A stdio MCP peer spoken to in raw JSON-RPC lines: answers are matched by id, and whatever
    the server sends on its own (requests, notifications) queues up in `incoming`, in order."""

    def __init__(self, argv: list[str], env: dict | None = None) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.ids = itertools.count(1)
        self.answers: dict[Any, queue.Queue] = {}
        self.lock = threading.Lock()
        self.incoming: queue.Queue = queue.Queue()
        #: Every message read, in order, for wire captures.
        self.log: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _box(self, rid) -> queue.Queue:
        with self.lock:
            return self.answers.setdefault(rid, queue.Queue())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.strip():
                continue
            message = json.loads(line)
            self.log.append(message)
            if "method" in message:
                self.incoming.put(message)
            else:
                self._box(message.get("id")).put(message)

    def send(self, message: dict) -> None:
        """Write one message as one line."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def send_request(self, method: str, params: dict | None = None) -> int:
        """Send a request without waiting; returns its id."""
        rid = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return rid

    def wait_response(self, rid: int, timeout: float = REQUEST_TIMEOUT) -> dict:
        """The whole response message for `rid` (result or error)."""
        try:
            return self._box(rid).get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to request {rid} within {timeout}s") from None

    def request(self, method: str, params: dict | None = None, timeout: float = REQUEST_TIMEOUT) -> dict:
        """Send a request and wait for its whole response message."""
        return self.wait_response(self.send_request(method, params), timeout)

    def next_incoming(self, timeout: float = REQUEST_TIMEOUT,
                      method: str | None = None) -> dict:
        """The next message the server sent on its own (of `method`, skipping others, if given)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                message = self.incoming.get(timeout=max(left, 0.001))
            except queue.Empty:
                raise AssertionError(f"the server sent no {method or 'message'} within {timeout}s") from None
            if method is None or message.get("method") == method:
                return message

    def respond(self, rid: Any, result: dict) -> None:
        """Answer a request the server sent."""
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def initialize(self, capabilities: dict | None = None, version: str = LEGACY) -> dict:
        """The handshake era's initialize + initialized; returns the initialize result."""
        answer = self.request("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                             "clientInfo": {"name": "tasks-test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer["result"]

    def modern(self, method: str, params: dict | None = None, tasks: bool = True,
               timeout: float = REQUEST_TIMEOUT) -> dict:
        """A 2026-07-28 request: the protocol version and capabilities ride in its `_meta`."""
        return self.request(method, {**(params or {}), "_meta": modern_meta(tasks)}, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Close stdin, then end the process if it has not gone by itself."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait(timeout=timeout)

    def __enter__(self) -> RawStdio:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def python_argv(module: str, *args: str) -> list[str]:
    """The command line that starts a test server module with this interpreter."""
    return [sys.executable, "-m", module, *args]


# -- raw 2026-07-28 JSON-RPC over Streamable HTTP ---------------------------------------------

class ModernHttp:
    """Stateless 2026-07-28 requests POSTed to a Streamable HTTP endpoint. Every request carries
    the MCP-Protocol-Version and Mcp-Method headers; tasks/get, tasks/update and tasks/cancel also
    carry Mcp-Name = params.taskId (SEP-2663), and tools/call carries Mcp-Name = the tool's name."""

    def __init__(self, url: str, tasks: bool = True, timeout: float = REQUEST_TIMEOUT, *,
                 capabilities: dict | None = None, token: str | None = None) -> None:
        self.url, self.tasks, self.timeout = url, tasks, timeout
        self.capabilities = capabilities  # declared beside the tasks extension
        self.auth = {"Authorization": f"Bearer {token}"} if token else {}
        self.ids = itertools.count(1)

    def headers(self, method: str, name: str | None) -> dict:
        """The SEP-2243 routing headers for one request."""
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
             "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        if name is not None:
            h["Mcp-Name"] = name
        return h

    def post(self, method: str, params: dict | None = None, name: str | None = None,
             headers: dict | None = None) -> dict:
        """POST one request; the whole JSON-RPC answer, whether it came as JSON or as SSE."""
        body = {"jsonrpc": "2.0", "id": next(self.ids), "method": method,
                "params": {**(params or {}), "_meta": modern_meta(self.tasks, self.capabilities)}}
        resp = requests.post(self.url, json=body, headers={**self.headers(method, name), **self.auth, **(headers or {})},
                             timeout=self.timeout)
        if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
            datas = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
            return json.loads(datas[-1])
        return resp.json()

    def discover(self) -> dict:
        return self.post("server/discover")

    def call_tool(self, name: str, arguments: dict | None = None) -> dict:
        return self.post("tools/call", {"name": name, "arguments": arguments or {}}, name=name)

    def tasks_get(self, task_id: str) -> dict:
        return self.post("tasks/get", {"taskId": task_id}, name=task_id)

    def tasks_update(self, task_id: str, input_responses: dict) -> dict:
        return self.post("tasks/update", {"taskId": task_id, "inputResponses": input_responses}, name=task_id)

    def tasks_cancel(self, task_id: str) -> dict:
        return self.post("tasks/cancel", {"taskId": task_id}, name=task_id)

    def wait_status(self, task_id: str, statuses: frozenset[str] | set[str], timeout: float = REQUEST_TIMEOUT) -> dict:
        """Poll tasks/get until the task's status is one of `statuses`; returns that result."""
        def reached():
            result = self.tasks_get(task_id).get("result") or {}
            return result if result.get("status") in statuses else None
        return wait_until(reached, timeout, f"task {task_id} to be {sorted(statuses)}")


# -- FastMCP's client, with fastmcp-tasks ------------------------------------------------------

def fastmcp_client(target: str | list[str], answer_name: str | None = None, **kwargs: Any):
    """A FastMCP `Client` (2026-07-28 by `mode="auto"`) for a URL or a stdio argv. Importing
    fastmcp_tasks is what gives every FastMCP Client task support; `answer_name`, when given,
    answers every elicitation by accepting {"name": answer_name}."""
    import fastmcp_tasks  # noqa: F401  (registers the client half of the tasks extension)
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    import os
    # The test's environment goes on to the server (TASKS_CANCEL_MARKER, say): FastMCP passes none.
    transport: Any = target if isinstance(target, str) else StdioTransport(target[0], target[1:],
                                                                        env=dict(os.environ))

    async def answer(message, response_type, params, context):
        return {"name": answer_name}

    if answer_name is not None:
        kwargs["elicitation_handler"] = answer
    return Client(transport, **kwargs)


async def fastmcp_start_task(client, name: str, arguments: dict | None = None):
    """Call a tool as a task, returning fastmcp_tasks' `ToolTask` handle at once
    (`.task_id`, `await .status()`, `await .wait(state=..., timeout=...)`, `await .result()`,
    `await .cancel()`)."""
    from fastmcp_tasks import call_tool_task
    return await call_tool_task(client, name, arguments or {})


# -- the official SDK's Client, with a tasks extension of its own ------------------------------
# mcp 2.x ships no tasks extension: it ships the mechanism (`mcp.client.extension.ClientExtension`
# with a `ResultClaim` on tools/call keyed by resultType) and the 2025-11-25 task types only.
# These models and the extension below are the SEP-2663 client half, written on that mechanism.

def _sdk_models():
    import mcp_types
    from pydantic import ConfigDict, Field
    from typing import Literal

    class TaskFields(mcp_types.Result):
        """The flat SEP-2663 Task fields, read by their wire names."""
        model_config = ConfigDict(populate_by_name=True, extra="allow")
        task_id: str = Field(alias="taskId")
        status: str
        created_at: str = Field(alias="createdAt")
        last_updated_at: str = Field(alias="lastUpdatedAt")
        ttl_ms: int | None = Field(default=None, alias="ttlMs")
        poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")
        status_message: str | None = Field(default=None, alias="statusMessage")

    class CreatedTask(TaskFields):
        """A tools/call answered with a task (resultType "task")."""
        result_type: Literal["task"] = Field(alias="resultType")

    class TaskState(TaskFields):
        """A tasks/get answer: the task, with its result, error or inputRequests inlined."""
        result_type: Literal["complete"] = Field(alias="resultType")
        result: dict | None = None
        error: dict | None = None
        input_requests: dict | None = Field(default=None, alias="inputRequests")

    class TaskIdParams(mcp_types.RequestParams):
        model_config = ConfigDict(populate_by_name=True)
        task_id: str = Field(serialization_alias="taskId")

    class UpdateParams(TaskIdParams):
        input_responses: dict = Field(serialization_alias="inputResponses")

    class Get(mcp_types.Request[TaskIdParams, Literal["tasks/get"]]):
        method: Literal["tasks/get"] = "tasks/get"
        params: TaskIdParams

    class Update(mcp_types.Request[UpdateParams, Literal["tasks/update"]]):
        method: Literal["tasks/update"] = "tasks/update"
        params: UpdateParams

    class Cancel(mcp_types.Request[TaskIdParams, Literal["tasks/cancel"]]):
        method: Literal["tasks/cancel"] = "tasks/cancel"
        params: TaskIdParams

    return CreatedTask, TaskState, TaskIdParams, UpdateParams, Get, Update, Cancel


SDK_MODELS = None


def sdk_models():
    """(CreatedTask, TaskState, TaskIdParams, UpdateParams, Get, Update, Cancel), built once."""
    global SDK_MODELS
    if SDK_MODELS is None:
        SDK_MODELS = _sdk_models()
    return SDK_MODELS


def sdk_tasks_extension():
    """An SDK `ClientExtension` for io.modelcontextprotocol/tasks: it advertises the extension
    (so the SDK puts it in every request's clientCapabilities) and claims resultType "task" on
    tools/call. Its resolver returns the task untouched as an error CallToolResult, so a plain
    `client.call_tool` never hides a task; drive tasks with `client.session.call_tool(...,
    allow_claimed=True)` and the sdk_* helpers below."""
    import mcp_types
    from mcp.client.extension import ClientExtension, ResultClaim
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    created = sdk_models()[0]

    async def unresolved(task, ctx) -> mcp_types.CallToolResult:
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=f"task {task.task_id}")],
                                        is_error=True)

    class SdkTasks(ClientExtension):
        identifier = TASKS_EXT

        def claims(self):
            return (ResultClaim(result_type="task", model=created, resolve=unresolved,
                                protocol_versions=frozenset(MODERN_PROTOCOL_VERSIONS)),)

    return SdkTasks()


def sdk_client(argv: list[str] | str, **kwargs: Any):
    """The official SDK's `mcp.Client` (auto mode: 2026-07-28 where the server has it) with the
    tasks extension, for a stdio argv or a Streamable HTTP URL."""
    import os

    from mcp import Client, StdioServerParameters

    transport: Any = argv if isinstance(argv, str) else StdioServerParameters(
        command=argv[0], args=argv[1:], env=dict(os.environ))
    return Client(transport, extensions=[sdk_tasks_extension()], **kwargs)


async def sdk_start_task(client, name: str, arguments: dict | None = None):
    """tools/call that the server may answer with a task: the `CreatedTask` (or a CallToolResult)."""
    return await client.session.call_tool(name, arguments or {}, allow_claimed=True)


async def sdk_get(client, task_id: str):
    """tasks/get: the `TaskState`."""
    _, state, ids, _, get, _, _ = sdk_models()
    return await client.session.send_request(get(params=ids(task_id=task_id)), state)


async def sdk_update(client, task_id: str, input_responses: dict) -> None:
    """tasks/update with the keyed answers (an empty ack)."""
    import mcp_types
    _, _, _, update_params, _, update, _ = sdk_models()
    await client.session.send_request(
        update(params=update_params(task_id=task_id, input_responses=input_responses)), mcp_types.Result)


async def sdk_cancel(client, task_id: str) -> None:
    """tasks/cancel (an empty ack)."""
    import mcp_types
    _, _, ids, _, _, _, cancel = sdk_models()
    await client.session.send_request(cancel(params=ids(task_id=task_id)), mcp_types.Result)


async def sdk_wait(client, task_id: str, statuses: frozenset[str] | set[str], timeout: float = REQUEST_TIMEOUT):
    """Poll tasks/get until the status is one of `statuses`; returns that `TaskState`."""
    import asyncio
    deadline = time.monotonic() + timeout
    while True:
        state = await sdk_get(client, task_id)
        if state.status in statuses:
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"task {task_id} still {state.status} after {timeout}s")
        await asyncio.sleep(POLL_EVERY)
