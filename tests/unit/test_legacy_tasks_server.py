"""tests/servers/legacy_tasks.py speaks the 2025-11-25 tasks utility: every message it sends is
valid against the SDK's 2025-11-25 wire models (mcp_types' era module, through
tests/support/schema.py), and it behaves as that revision says."""
from __future__ import annotations

import os

import pytest

from tests.support.schema import validate, validate_message
from tests.support.tasks_client import RELATED_TASK, TERMINAL, RawStdio, python_argv, wait_until

# The SDK's method maps carry no tasks/* entries for 2025-11-25, but its era module keeps the
# schema's types: each task answer is checked as its named type.
TASK_RESULTS = {"tasks/get": "GetTaskResult", "tasks/cancel": "CancelTaskResult",
                "tasks/list": "ListTasksResult", "tasks/result": "CallToolResult"}


@pytest.fixture
def server(tmp_path):
    marker = tmp_path / "cancelled"
    with RawStdio(python_argv("tests.servers.legacy_tasks"),
                  env={**os.environ, "TASKS_CANCEL_MARKER": str(marker)}) as s:
        s.marker = marker  # type: ignore[attr-defined]
        yield s
        for message in s.log:  # whatever else it sent on its own is valid too
            if "method" in message:
                validate_message(message, "server")


def ask(s: RawStdio, method: str, params: dict | None = None) -> dict:
    """A request whose answer is checked: the envelope, then the result's own type."""
    request = {"jsonrpc": "2.0", "id": 0, "method": method, "params": params or {}}
    if method == "tools/call" or method == "initialize":
        validate_message(request, "client")
    answer = s.request(method, params)
    if "error" in answer:
        validate_message(answer, "server")
        return answer
    if method in TASK_RESULTS:
        validate_message(answer, "server")
        validate(answer["result"], TASK_RESULTS[method])
    elif method == "tools/call" and "task" in (params or {}):
        validate_message(answer, "server")
        validate(answer["result"], "CreateTaskResult")
    else:
        validate_message(answer, "server", method=method)
    return answer


def start(s: RawStdio, name: str, arguments: dict | None = None, ttl: int | None = 60_000) -> str:
    answer = ask(s, "tools/call", {"name": name, "arguments": arguments or {}, "task": {"ttl": ttl}})
    task = answer["result"]["task"]
    assert task["status"] == "working" and task["ttl"] == ttl
    return task["taskId"]


def test_declares_tasks_and_per_tool_support(server):
    init = server.initialize()
    validate(init, "InitializeResult")
    assert init["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    tools = {t["name"]: t for t in ask(server, "tools/list")["result"]["tools"]}
    assert tools["slow_add"]["execution"] == {"taskSupport": "optional"}
    assert tools["must_task"]["execution"] == {"taskSupport": "required"}
    assert tools["shout"]["execution"] == {"taskSupport": "forbidden"}
    assert "execution" not in tools["echo"]


def test_task_lifecycle_result_and_status_notifications(server):
    server.initialize()
    tid = start(server, "slow_add", {"a": 2, "b": 3, "seconds": 0.2})
    assert ask(server, "tasks/get", {"taskId": tid})["result"]["status"] in ("working", "completed")
    result = ask(server, "tasks/result", {"taskId": tid})["result"]  # blocks until terminal
    assert result["content"][0]["text"] == "5"
    assert result["_meta"][RELATED_TASK] == {"taskId": tid}
    note = server.next_incoming(method="notifications/tasks/status")
    validate_message(note, "server")
    assert note["params"]["taskId"] == tid and note["params"]["status"] == "completed"
    assert RELATED_TASK not in note["params"].get("_meta", {})
    assert ask(server, "tasks/get", {"taskId": tid})["result"]["status"] == "completed"


def test_task_support_is_enforced(server):
    server.initialize()
    assert ask(server, "tools/call", {"name": "must_task", "arguments": {"text": "x"}})["error"]["code"] == -32601
    forbidden = ask(server, "tools/call", {"name": "shout", "arguments": {"text": "x"}, "task": {}})
    assert forbidden["error"]["code"] == -32601
    plain = ask(server, "tools/call", {"name": "slow_add", "arguments": {"a": 1, "b": 1, "seconds": 0}})
    assert plain["result"]["content"][0]["text"] == "2"  # optional: a plain call answers directly
    assert ask(server, "tasks/get", {"taskId": "nope"})["error"]["code"] == -32602


def test_input_required_elicits_while_tasks_result_is_pending(server):
    server.initialize({"elicitation": {"form": {}}})
    tid = start(server, "ask_name")
    wait_until(lambda: ask(server, "tasks/get", {"taskId": tid})["result"]["status"] == "input_required",
               10, "input_required")
    pending = server.send_request("tasks/result", {"taskId": tid})
    elicit = server.next_incoming(method="elicitation/create")
    validate_message(elicit, "server")
    assert elicit["params"]["_meta"][RELATED_TASK] == {"taskId": tid}
    server.respond(elicit["id"], {"action": "accept", "content": {"name": "Ada"}})
    validate_message({"jsonrpc": "2.0", "id": elicit["id"], "result": {"action": "accept", "content": {"name": "Ada"}}},
                     "client", method="elicitation/create")
    answer = server.wait_response(pending)
    validate_message(answer, "server")
    validate(answer["result"], "CallToolResult")
    assert answer["result"]["content"][0]["text"] == "hello Ada"
    assert answer["result"]["_meta"][RELATED_TASK] == {"taskId": tid}


def test_cancel_list_and_failed(server):
    server.initialize()
    tid = start(server, "wait_forever")
    cancelled = ask(server, "tasks/cancel", {"taskId": tid})["result"]
    assert cancelled["status"] == "cancelled"  # cancelled before the answer, per the revision
    wait_until(server.marker.exists, 10, "the cancellation marker")
    assert ask(server, "tasks/cancel", {"taskId": tid})["error"]["code"] == -32602  # already terminal
    broken = start(server, "broken")
    wait_until(lambda: ask(server, "tasks/get", {"taskId": broken})["result"]["status"] in TERMINAL, 10, "failed")
    assert ask(server, "tasks/get", {"taskId": broken})["result"]["status"] == "failed"
    assert ask(server, "tasks/result", {"taskId": broken})["result"]["isError"] is True
    third = start(server, "slow_add", {"a": 1, "b": 2, "seconds": 0})
    first = ask(server, "tasks/list")["result"]
    assert [t["taskId"] for t in first["tasks"]] == [tid, broken] and first["nextCursor"]
    second = ask(server, "tasks/list", {"cursor": first["nextCursor"]})["result"]
    assert [t["taskId"] for t in second["tasks"]] == [third] and "nextCursor" not in second
    assert ask(server, "tasks/list", {"cursor": "not-a-cursor"})["error"]["code"] == -32602
