"""The task test peers work as real clients see them, with no troupe between: FastMCP's client
(fastmcp-tasks), the official SDK's Client with a tasks extension, and raw 2026-07-28 HTTP, each
against tests/servers/fastmcp_tasks.py: a task is created and polled to completion, a task's
input_required round is answered through tasks/update, and a cancellation reaches the server."""
from __future__ import annotations

import asyncio
import os
import sys

import pytest

from tests.support.ports import start_announced, stop
from tests.support.tasks_client import (
    TERMINAL,
    ModernHttp,
    fastmcp_client,
    fastmcp_start_task,
    marker_has,
    python_argv,
    sdk_cancel,
    sdk_client,
    sdk_start_task,
    sdk_update,
    sdk_wait,
    wait_until,
)

pytestmark = pytest.mark.slow  # each test runs FastMCP with its Docket worker
SERVER = "tests.servers.fastmcp_tasks"
BOUND = 30.0


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """The file wait_forever appends "started" and "cancelled" to (the helpers pass the env on)."""
    path = tmp_path / "cancelled"
    monkeypatch.setenv("TASKS_CANCEL_MARKER", str(path))
    return path


async def _started(marker) -> None:
    """Wait for wait_forever's body to run: a task cancelled while still queued never starts."""
    deadline = asyncio.get_running_loop().time() + BOUND
    while not marker_has(marker, "started"):
        assert asyncio.get_running_loop().time() < deadline, "wait_forever never started"
        await asyncio.sleep(0.05)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_fastmcp_client_drives_tasks_over_stdio(marker):
    async def scenario():
        async with fastmcp_client(python_argv(SERVER), answer_name="Ada") as client:
            task = await fastmcp_start_task(client, "slow_add", {"a": 2, "b": 3, "seconds": 0.3})
            assert task.create_result.result_type == "task" and task.create_result.status == "working"
            done = await task.wait(timeout=BOUND)
            assert done.status == "completed"
            assert (await task.result()).data == 5
            # A plain call_tool of a task tool is tasked too, and resolved behind the caller's back.
            assert (await client.call_tool("slow_add", {"a": 1, "b": 1, "seconds": 0})).data == 2

            asking = await fastmcp_start_task(client, "ask_name")
            parked = await asking.wait(state="input_required", timeout=BOUND)
            (request,) = (parked.input_requests or {}).values()
            assert request["method"] == "elicitation/create"
            assert (await asking.result()).data == "hello Ada"  # answered through tasks/update

            forever = await fastmcp_start_task(client, "wait_forever")
            await _started(marker)
            await forever.cancel()
            assert (await forever.wait(state="cancelled", timeout=BOUND)).status == "cancelled"
            wait_until(lambda: marker_has(marker, "cancelled"), BOUND, "the server to see the cancellation")
            assert (await client.call_tool("cancelled_count", {})).data == 1
    _run(scenario())


def test_sdk_client_drives_tasks_over_stdio(marker):
    async def scenario():
        async with sdk_client(python_argv(SERVER)) as client:
            created = await sdk_start_task(client, "slow_add", {"a": 2, "b": 3, "seconds": 0.3})
            assert created.result_type == "task" and created.status == "working" and created.ttl_ms
            done = await sdk_wait(client, created.task_id, TERMINAL, BOUND)
            assert done.status == "completed" and done.result["structuredContent"] == {"result": 5}

            asking = await sdk_start_task(client, "ask_name")
            parked = await sdk_wait(client, asking.task_id, {"input_required"}, BOUND)
            (key,) = parked.input_requests
            assert parked.input_requests[key]["params"]["message"] == "What is your name?"
            await sdk_update(client, asking.task_id, {key: {"action": "accept", "content": {"name": "Grace"}}})
            done = await sdk_wait(client, asking.task_id, TERMINAL, BOUND)
            assert done.status == "completed" and done.result["content"][0]["text"] == "hello Grace"

            forever = await sdk_start_task(client, "wait_forever")
            await _started(marker)
            await sdk_cancel(client, forever.task_id)
            assert (await sdk_wait(client, forever.task_id, TERMINAL, BOUND)).status == "cancelled"
            wait_until(lambda: marker_has(marker, "cancelled"), BOUND, "the server to see the cancellation")
    _run(scenario())


def test_raw_modern_http_with_routing_headers(tmp_path, marker):
    proc, port = start_announced([sys.executable, "-m", SERVER, "--http", "0"], tmp_path / "server.log",
                                 env=dict(os.environ))
    try:
        http = ModernHttp(f"http://127.0.0.1:{port}/mcp")
        assert "io.modelcontextprotocol/tasks" in http.discover()["result"]["capabilities"]["extensions"]
        created = http.call_tool("ask_name")["result"]
        assert created["resultType"] == "task"
        parked = http.wait_status(created["taskId"], {"input_required"}, BOUND)
        (key,) = parked["inputRequests"]
        ack = http.tasks_update(created["taskId"], {key: {"action": "accept", "content": {"name": "Lin"}}})
        assert ack["result"]["resultType"] == "complete"
        done = http.wait_status(created["taskId"], TERMINAL, BOUND)
        assert done["result"]["content"][0]["text"] == "hello Lin"
        # Mcp-Name must agree with params.taskId: the server checks it.
        wrong = http.post("tasks/get", {"taskId": created["taskId"]}, name="someone-else")
        assert wrong["error"]["code"] == -32020  # HEADER_MISMATCH
        forever = http.call_tool("wait_forever")["result"]["taskId"]
        wait_until(lambda: marker_has(marker, "started"), BOUND, "wait_forever to start")
        assert http.tasks_cancel(forever)["result"]["resultType"] == "complete"
        assert http.wait_status(forever, TERMINAL, BOUND)["status"] == "cancelled"
        wait_until(lambda: marker_has(marker, "cancelled"), BOUND, "the server to see the cancellation")
        # Without the extension in the request's capabilities, the call is not tasked.
        plain = ModernHttp(http.url, tasks=False).call_tool("slow_add", {"a": 1, "b": 2, "seconds": 0})
        assert plain["result"]["structuredContent"] == {"result": 3}
    finally:
        stop(proc)


def test_slow_plain_sleeps_then_answers():
    """tests/servers/slow_plain.py: a plain (task-less) tool that takes its time, then answers."""
    import time

    from tests.support.tasks_client import RawStdio
    with RawStdio(python_argv("tests.servers.slow_plain")) as s:
        assert "tasks" not in s.initialize()["capabilities"]
        started = time.monotonic()
        answer = s.request("tools/call", {"name": "sleep_then", "arguments": {"seconds": 0.5, "text": "late"}})
        assert time.monotonic() - started >= 0.5
        assert answer["result"]["content"][0]["text"] == "late"
