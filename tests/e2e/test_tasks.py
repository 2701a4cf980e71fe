"""MCP tasks through a real troupe process (issue 28, items 1 and 2), with real peers on both sides:
a server's own tasks (FastMCP with fastmcp-tasks, SEP-2663; tests/servers/legacy_tasks.py, the
2025-11-25 form) relayed under troupe's sealed ids, tasks troupe mints around a slow call of a
server without tasks (tests/servers/slow_plain.py), each era's clients (fastmcp-tasks' client, the
SDK's Client with a tasks extension, raw 2026-07-28 JSON-RPC over stdio and HTTP, a raw 2025-11-25
session), named clients kept apart, cancellation reaching the server, and listen streams."""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import queue
import time

import pytest
import requests

from tests.support.schema import validate, validate_message
from tests.support.tasks_client import (
    LEGACY,
    RELATED_TASK,
    TERMINAL,
    ModernHttp,
    RawStdio,
    fastmcp_client,
    fastmcp_start_task,
    marker_has,
    modern_meta,
    python_argv,
    sdk_cancel,
    sdk_client,
    sdk_start_task,
    sdk_update,
    sdk_wait,
    wait_until,
)
from tests.support.troupe import Troupe, TroupeHttp, server, write_config

BOUND = 30.0  # the most any one wait below may take
PREFIX = "troupe1."  # every task id troupe hands out is sealed under its own prefix
LEGACY_CLIENT_CAPS = {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}, "elicitation": {}}
TOKENS = {"alice": "alice-tasks-token-0123456789", "bob": "bob-tasks-token-0123456789"}
INVALID_PARAMS = -32602
# The 2025-11-25 result type of each task method (the SDK's method maps have no tasks/* entries).
LEGACY_RESULTS = {"tasks/get": "GetTaskResult", "tasks/cancel": "CancelTaskResult",
                  "tasks/list": "ListTasksResult", "tasks/result": "CallToolResult"}


def _servers(marker) -> list[dict]:
    env = {"env": {"TASKS_CANCEL_MARKER": str(marker)}}

    def with_env(entry: dict) -> dict:
        entry["transport"]["stdio"].update(env)
        return entry
    return [with_env(server("ft", "tests.servers.fastmcp_tasks")), server("sp", "tests.servers.slow_plain"),
            with_env(server("lt", "tests.servers.legacy_tasks"))]


def _troupe_argv(config) -> list[str]:
    return python_argv("actors.main", "--config", str(config))


def _forged(task_id: str) -> str:
    """The id with one character of its signature changed."""
    last = task_id[-2]
    return task_id[:-2] + ("A" if last != "A" else "B") + task_id[-1]


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def _count(marker, line: str) -> int:
    try:
        return marker.read_text().splitlines().count(line)
    except FileNotFoundError:
        return 0


# ---------------------------------------------------------------- fastmcp-tasks' client and the SDK's


async def _fastmcp_slow_add(target) -> None:
    async with fastmcp_client(target) as client:
        task = await fastmcp_start_task(client, "ft__slow_add", {"a": 2, "b": 3, "seconds": 0.3})
        assert task.task_id.startswith(PREFIX)
        assert task.create_result.result_type == "task"
        assert (await task.wait(timeout=BOUND)).status == "completed"
        assert (await task.result()).data == 5


@pytest.mark.slow
def test_fastmcp_tasks_client_over_http_and_stdio_and_no_minting_when_told_not_to(tmp_path):
    """With serve.tasks.mint_after false, a task-capable caller of a slow plain tool waits for the
    plain result; a server's own tasks are still relayed."""
    config = write_config(tmp_path, [server("ft", "tests.servers.fastmcp_tasks"), server("sp", "tests.servers.slow_plain")],
                          mode="flat", tasks={"mint_after": False})
    t = TroupeHttp(config)
    try:
        _run(_fastmcp_slow_add(t.url))
        began = time.monotonic()
        answer = ModernHttp(t.url).call_tool("sp__sleep_then", {"seconds": 1.5, "text": "plain"})
        assert time.monotonic() - began >= 1.4
        assert answer["result"].get("resultType") != "task" and answer["result"]["content"][0]["text"] == "plain"
    finally:
        assert t.stop() == 0
    _run(_fastmcp_slow_add(_troupe_argv(config)))


@pytest.mark.slow
def test_sdk_client_answers_input_required_and_cancels(tmp_path):
    marker = tmp_path / "marker"
    config = write_config(tmp_path, _servers(marker)[:1], mode="flat")

    async def scenario():
        async with sdk_client(_troupe_argv(config)) as client:
            asking = await sdk_start_task(client, "ft__ask_name")
            assert asking.result_type == "task" and asking.task_id.startswith(PREFIX)
            parked = await sdk_wait(client, asking.task_id, {"input_required"}, BOUND)
            (key,) = parked.input_requests
            assert parked.input_requests[key]["params"]["message"] == "What is your name?"
            await sdk_update(client, asking.task_id, {key: {"action": "accept", "content": {"name": "Grace"}}})
            done = await sdk_wait(client, asking.task_id, TERMINAL, BOUND)
            assert done.status == "completed" and done.result["content"][0]["text"] == "hello Grace"

            forever = await sdk_start_task(client, "ft__wait_forever")
            wait_until(lambda: marker_has(marker, "started"), BOUND, "wait_forever to start")
            await sdk_cancel(client, forever.task_id)
            assert (await sdk_wait(client, forever.task_id, TERMINAL, BOUND)).status == "cancelled"
            wait_until(lambda: marker_has(marker, "cancelled"), BOUND, "the server to see the cancellation")
    _run(scenario())


# ---------------------------------------------------------------- named clients over HTTP


class LegacyHttp:
    """A 2025-11-25 Streamable HTTP session (troupe answering in plain JSON), optionally as a named
    client (its bearer token), declaring that it may task-augment tools/call."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.url, self.http, self.ids = url, requests.Session(), itertools.count(1)
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if token is not None:
            self.headers["Authorization"] = f"Bearer {token}"
        init = self.request("initialize", {"protocolVersion": LEGACY, "capabilities": LEGACY_CLIENT_CAPS,
                                           "clientInfo": {"name": "tasks-test", "version": "1"}})
        assert init["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"] == {}, init
        self.http.post(self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                       headers=self.headers, timeout=BOUND)

    def request(self, method: str, params: dict | None = None) -> dict:
        resp = self.http.post(self.url, json={"jsonrpc": "2.0", "id": next(self.ids), "method": method,
                                              "params": params or {}}, headers=self.headers, timeout=BOUND)
        if "Mcp-Session-Id" in resp.headers:
            self.headers.update({"Mcp-Session-Id": resp.headers["Mcp-Session-Id"], "MCP-Protocol-Version": LEGACY})
        return resp.json()

    def close(self) -> None:
        """End the session (DELETE), the way a client leaves."""
        self.http.delete(self.url, headers=self.headers, timeout=BOUND)
        self.http.close()


class NamedModern(ModernHttp):
    """Raw 2026-07-28 over HTTP as a named client (every request carries its bearer token)."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(url)
        self.token = token

    def headers(self, method: str, name: str | None) -> dict:
        return {**super().headers(method, name), "Authorization": f"Bearer {self.token}"}


def _listen_ack(url: str, token: str, task_ids: list[str]) -> dict:
    """Open a listen stream as a named client and read its acknowledgement."""
    body = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": task_ids}, "_meta": modern_meta()}}
    with requests.post(url, json=body, stream=True, timeout=BOUND,
                       headers={**NamedModern(url, token).headers("subscriptions/listen", None)}) as resp:
        for raw in resp.iter_lines():
            if raw.startswith(b"data: "):
                return json.loads(raw[6:])
    raise AssertionError("the listen stream ended without an acknowledgement")


@pytest.fixture
def named(tmp_path):
    config = write_config(tmp_path, [server("lt", "tests.servers.legacy_tasks")], mode="flat", json_response=True,
                          clients=[{"name": name, "token": token} for name, token in TOKENS.items()])
    t = TroupeHttp(config)
    yield t
    assert t.stop() == 0


def test_named_clients_reach_only_their_own_tasks_and_keep_them_across_sessions(named):
    alice, bob = NamedModern(named.url, TOKENS["alice"]), NamedModern(named.url, TOKENS["bob"])
    created = alice.call_tool("lt__slow_add", {"a": 20, "b": 22, "seconds": 1.5})["result"]
    task_id = created["taskId"]
    assert created["resultType"] == "task" and task_id.startswith(PREFIX)
    for answer in (bob.tasks_get(task_id), bob.tasks_cancel(task_id),
                   bob.tasks_update(task_id, {"k": {"action": "decline"}}),
                   alice.tasks_get(_forged(task_id)), alice.tasks_cancel(_forged(task_id))):
        assert answer.get("error", {}).get("code") == INVALID_PARAMS, answer
    # Mcp-Name may be left out of a task request (the SDK's client does), never contradict its taskId.
    assert alice.post("tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
    assert alice.post("tasks/get", {"taskId": task_id}, name=_forged(task_id))["error"]["code"] == -32020
    # bob's listen does not follow alice's task; alice's does.
    assert _listen_ack(named.url, TOKENS["bob"], [task_id])["params"]["notifications"]["taskIds"] == []
    assert _listen_ack(named.url, TOKENS["alice"], [task_id])["params"]["notifications"]["taskIds"] == [task_id]
    # alice again, as a new client of the same token: her task is still hers, bob's cancel changed nothing.
    again = NamedModern(named.url, TOKENS["alice"])
    done = again.wait_status(task_id, TERMINAL, BOUND)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "42"


def test_legacy_sessions_of_named_and_anonymous_clients_are_kept_apart(named):
    first = LegacyHttp(named.url, TOKENS["alice"])
    task = first.request("tools/call", {"name": "lt__slow_add", "arguments": {"a": 1, "b": 1, "seconds": 1},
                                        "task": {"ttl": 60_000}})["result"]["task"]
    task_id = task["taskId"]
    assert task_id.startswith(PREFIX)
    first.close()
    # A new session with alice's token reaches her task and lists it; bob's and an anonymous one do not.
    second, bob = LegacyHttp(named.url, TOKENS["alice"]), LegacyHttp(named.url, TOKENS["bob"])
    assert task_id in [t["taskId"] for t in second.request("tasks/list")["result"]["tasks"]]
    assert bob.request("tasks/get", {"taskId": task_id})["error"]["code"] == INVALID_PARAMS
    assert bob.request("tasks/cancel", {"taskId": task_id})["error"]["code"] == INVALID_PARAMS
    assert bob.request("tasks/result", {"taskId": task_id})["error"]["code"] == INVALID_PARAMS
    assert task_id not in [t["taskId"] for t in bob.request("tasks/list")["result"]["tasks"]]
    result = second.request("tasks/result", {"taskId": task_id})["result"]
    assert result["content"][0]["text"] == "2" and result["_meta"][RELATED_TASK]["taskId"] == task_id


def test_anonymous_legacy_sessions_each_reach_only_their_own_tasks(http_troupe):
    t = http_troupe([server("lt", "tests.servers.legacy_tasks")], mode="flat", json_response=True)
    first, second = LegacyHttp(t.url), LegacyHttp(t.url)
    mine = first.request("tools/call", {"name": "lt__slow_add", "arguments": {"a": 2, "b": 2, "seconds": 0},
                                        "task": {}})["result"]["task"]["taskId"]
    assert mine.startswith(PREFIX)
    assert [x["taskId"] for x in first.request("tasks/list")["result"]["tasks"]] == [mine]
    assert second.request("tasks/list")["result"]["tasks"] == []
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        assert second.request(method, {"taskId": mine})["error"]["code"] == INVALID_PARAMS
    assert first.request("tasks/result", {"taskId": mine})["result"]["content"][0]["text"] == "4"


# ---------------------------------------------------------------- a 2025-11-25 client over stdio


@pytest.fixture
def legacy(tmp_path):
    """troupe over stdio to a raw 2025-11-25 client that may task-augment tools/call; every message
    troupe sends it is checked against the SDK's 2025-11-25 models afterwards."""
    marker = tmp_path / "marker"
    servers = [_servers(marker)[2]]
    t = Troupe(write_config(tmp_path, servers, mode="flat"))
    init = t.request("initialize", {"protocolVersion": LEGACY, "capabilities": LEGACY_CLIENT_CAPS,
                                    "clientInfo": {"name": "tasks-test", "version": "1"}}, timeout=BOUND)
    assert init["result"]["capabilities"]["tasks"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    t.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield t
    t.close()
    checked = _validate_legacy(t)
    assert {"CreateTaskResult", "GetTaskResult", "CallToolResult", "ListTasksResult"} <= checked, checked


def _validate_legacy(t: Troupe) -> set[str]:
    """Check every message troupe sent `t`'s client against the SDK's 2025-11-25 models; returns
    the type names checked (so a test can tell its task messages were among them)."""
    methods = {m["id"]: m for m in t.sent if isinstance(m, dict) and "id" in m and "method" in m}
    names = set()
    for message in t.received:
        names.add(validate_message(message, "server", version=LEGACY))
        request = methods.get(message.get("id")) if "method" not in message else None
        if "result" not in message or request is None:
            continue
        method = request["method"]
        if method in LEGACY_RESULTS:
            validate(message["result"], LEGACY_RESULTS[method], LEGACY)
            names.add(LEGACY_RESULTS[method])
        elif method == "tools/call" and "task" in request["params"]:
            validate(message["result"], "CreateTaskResult", LEGACY)
            names.add("CreateTaskResult")
        else:
            names.add(validate_message(message, "server", method=method, version=LEGACY))
    return names


def _note(t: Troupe, method: str, timeout: float = BOUND) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"troupe sent no {method} within {timeout}s"
        try:
            message = t.notifications.get(timeout=left)
        except queue.Empty:
            continue
        if message.get("method") == method:
            return message


def test_legacy_client_tasks_with_result_elicitation_list_and_status(legacy):
    tools = {tool["name"]: tool for tool in legacy.request("tools/list", timeout=BOUND)["result"]["tools"]}
    assert tools["lt__slow_add"]["execution"]["taskSupport"] == "optional"
    assert tools["lt__ask_name"]["execution"]["taskSupport"] == "required"
    # A tool the server runs only plainly, or says nothing of: troupe mints a task around it.
    assert tools["lt__shout"]["execution"]["taskSupport"] == "optional"
    assert tools["lt__echo"]["execution"]["taskSupport"] == "optional"
    created = legacy.request("tools/call", {"name": "lt__slow_add", "arguments": {"a": 3, "b": 4, "seconds": 0.3},
                                            "task": {"ttl": 60_000}})["result"]
    task_id = created["task"]["taskId"]
    assert task_id.startswith(PREFIX) and created["task"]["status"] == "working"
    assert legacy.request("tasks/get", {"taskId": task_id})["result"]["taskId"] == task_id
    result = legacy.request("tasks/result", {"taskId": task_id})["result"]
    assert result["content"][0]["text"] == "7" and result["_meta"][RELATED_TASK]["taskId"] == task_id
    status = _note(legacy, "notifications/tasks/status")
    assert status["params"]["taskId"] == task_id

    asking = legacy.request("tools/call", {"name": "lt__ask_name", "arguments": {}, "task": {}})["result"]["task"]
    pending = legacy.send_request("tasks/result", {"taskId": asking["taskId"]})
    elicit = _note(legacy, "elicitation/create")
    assert elicit["params"]["_meta"][RELATED_TASK]["taskId"] == asking["taskId"]
    legacy.send({"jsonrpc": "2.0", "id": elicit["id"], "result": {"action": "accept", "content": {"name": "Ada"}}})
    answered = legacy.wait_response(pending, BOUND)
    assert answered["result"]["content"][0]["text"] == "hello Ada"
    listed = {t["taskId"]: t for t in legacy.request("tasks/list")["result"]["tasks"]}
    assert set(listed) == {task_id, asking["taskId"]} and listed[task_id]["status"] == "completed"
    assert legacy.request("tasks/get", {"taskId": _forged(task_id)})["error"]["code"] == INVALID_PARAMS


@pytest.mark.slow
def test_a_legacy_client_drives_a_fastmcp_task_server(tmp_path):
    t = Troupe(write_config(tmp_path, [server("ft", "tests.servers.fastmcp_tasks")], mode="flat"))
    try:
        t.request("initialize", {"protocolVersion": LEGACY, "capabilities": LEGACY_CLIENT_CAPS,
                                 "clientInfo": {"name": "tasks-test", "version": "1"}}, timeout=BOUND)
        t.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools = {tool["name"]: tool for tool in t.request("tools/list", timeout=BOUND)["result"]["tools"]}
        assert tools["ft__slow_add"]["execution"]["taskSupport"] == "optional"
        created = t.request("tools/call", {"name": "ft__slow_add", "arguments": {"a": 5, "b": 6, "seconds": 0.3},
                                           "task": {"ttl": 60_000}})["result"]
        task_id = created["task"]["taskId"]
        assert task_id.startswith(PREFIX)
        result = t.request("tasks/result", {"taskId": task_id}, timeout=BOUND)["result"]
        assert result["structuredContent"] == {"result": 11} and result["_meta"][RELATED_TASK]["taskId"] == task_id
        assert t.request("tasks/get", {"taskId": task_id})["result"]["status"] == "completed"
    finally:
        t.close()
    assert {"CreateTaskResult", "GetTaskResult", "CallToolResult"} <= _validate_legacy(t)


# ---------------------------------------------------------------- one modern stdio troupe for many tests


@pytest.fixture(scope="module")
def modern(tmp_path_factory):
    """troupe over stdio, spoken to in raw 2026-07-28 JSON-RPC, serving ft (FastMCP tasks), sp (no
    tasks) and lt (2025-11-25 tasks); `.marker` is the servers' cancellation marker."""
    tmp = tmp_path_factory.mktemp("modern")
    marker = tmp / "marker"
    config = write_config(tmp, _servers(marker), mode="flat")
    with RawStdio(_troupe_argv(config), env=dict(os.environ)) as s:
        s.marker = marker  # type: ignore[attr-defined]
        names = {t["name"] for t in s.modern("tools/list", timeout=BOUND)["result"]["tools"]}
        assert {"ft__slow_add", "sp__sleep_then", "lt__slow_add"} <= names
        yield s


def _get(s: RawStdio, task_id: str) -> dict:
    return s.modern("tasks/get", {"taskId": task_id})


def _wait(s: RawStdio, task_id: str, statuses, timeout: float = BOUND) -> dict:
    def reached():
        result = _get(s, task_id).get("result") or {}
        return result if result.get("status") in statuses else None
    return wait_until(reached, timeout, f"task to be {sorted(statuses)}")


def _status(s: RawStdio) -> dict:
    return json.loads(s.modern("tools/call", {"name": "core_status", "arguments": {}}, tasks=False)
                      ["result"]["content"][0]["text"])


def _server_status(s: RawStdio, name: str) -> dict:
    return next(x for x in _status(s)["servers"] if x["name"] == name)


@pytest.mark.slow
def test_cancel_reaches_the_fastmcp_server(modern):
    before = int(modern.modern("tools/call", {"name": "ft__cancelled_count", "arguments": {}}, tasks=False)
                 ["result"]["structuredContent"]["result"])
    started, cancelled = _count(modern.marker, "started"), _count(modern.marker, "cancelled")
    created = modern.modern("tools/call", {"name": "ft__wait_forever", "arguments": {}})["result"]
    assert created["resultType"] == "task" and created["taskId"].startswith(PREFIX)
    wait_until(lambda: _count(modern.marker, "started") > started, BOUND, "wait_forever to start")
    ack = modern.modern("tasks/cancel", {"taskId": created["taskId"]})
    assert "error" not in ack, ack
    assert _wait(modern, created["taskId"], TERMINAL)["status"] == "cancelled"
    wait_until(lambda: _count(modern.marker, "cancelled") > cancelled, BOUND, "the server to see the cancel")
    after = modern.modern("tools/call", {"name": "ft__cancelled_count", "arguments": {}}, tasks=False)
    assert after["result"]["structuredContent"]["result"] == before + 1


def test_minted_task_around_a_slow_plain_call(modern):
    """A 5 s call of a server without tasks: a task-capable caller holds a task within mint_after
    (1 s by default); a caller without the extension waits and gets the plain result; a quick
    call is answered plainly."""
    plain_rid = modern.send_request("tools/call", {"name": "sp__sleep_then", "arguments": {"seconds": 5, "text": "late"},
                                                   "_meta": modern_meta(tasks=False)})
    began = time.monotonic()
    created = modern.modern("tools/call", {"name": "sp__sleep_then", "arguments": {"seconds": 5, "text": "done"}})
    took = time.monotonic() - began
    assert created["result"]["resultType"] == "task", created
    assert 0.9 <= took < 3.0, f"the task came after {took:.1f}s, not at mint_after (1 s)"
    task_id = created["result"]["taskId"]
    assert task_id.startswith(PREFIX) and created["result"]["status"] == "working"
    assert _get(modern, task_id)["result"]["status"] == "working"
    quick = modern.modern("tools/call", {"name": "sp__sleep_then", "arguments": {"seconds": 0, "text": "quick"}})
    assert quick["result"].get("resultType") != "task" and quick["result"]["content"][0]["text"] == "quick"
    done = _wait(modern, task_id, TERMINAL)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "done"
    # The kept result is troupe's to serve, as a plain one is: it carries no stamp of the server's own.
    assert "io.modelcontextprotocol/serverInfo" not in (done["result"].get("_meta") or {}), done
    plain = modern.wait_response(plain_rid, BOUND)
    assert time.monotonic() - began >= 4.9
    assert "taskId" not in plain["result"] and plain["result"]["content"][0]["text"] == "late"


def test_cancelling_a_minted_task_withdraws_the_upstream_call(modern):
    created = modern.modern("tools/call", {"name": "sp__sleep_then", "arguments": {"seconds": 60, "text": "never"}},
                            timeout=BOUND)["result"]
    assert created["resultType"] == "task"
    assert _server_status(modern, "sp")["in_flight"] == 1
    cancelled_before = _status(modern)["tasks"]["by_state"]["cancelled"]
    assert "error" not in modern.modern("tasks/cancel", {"taskId": created["taskId"]})
    assert _get(modern, created["taskId"])["result"]["status"] == "cancelled"
    wait_until(lambda: _server_status(modern, "sp")["in_flight"] == 0, BOUND, "the upstream call to be withdrawn")
    assert _status(modern)["tasks"]["by_state"]["cancelled"] == cancelled_before + 1


def test_a_modern_client_drives_a_legacy_task_server(modern):
    created = modern.modern("tools/call", {"name": "lt__slow_add", "arguments": {"a": 4, "b": 5, "seconds": 0.3}})
    task_id = created["result"]["taskId"]
    assert created["result"]["resultType"] == "task" and task_id.startswith(PREFIX)
    done = _wait(modern, task_id, TERMINAL)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "9"
    # The server's own id never reaches the client: the result is not tied to it.
    assert RELATED_TASK not in (done["result"].get("_meta") or {})
    # A question needs a client that declared elicitation (the capability rides in each request).
    meta = modern_meta()
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = {}
    asking = modern.request("tools/call", {"name": "lt__ask_name", "arguments": {}, "_meta": meta}
                            )["result"]["taskId"]
    parked = _wait(modern, asking, {"input_required"})
    (key,) = parked["inputRequests"]
    assert parked["inputRequests"][key]["method"] == "elicitation/create"
    ack = modern.modern("tasks/update", {"taskId": asking,
                                         "inputResponses": {key: {"action": "accept", "content": {"name": "Hopper"}}}})
    assert "error" not in ack, ack
    done = _wait(modern, asking, TERMINAL)
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "hello Hopper"


def test_listen_hears_its_task_complete_and_drops_a_forged_id(modern):
    created = modern.modern("tools/call", {"name": "lt__slow_add", "arguments": {"a": 1, "b": 2, "seconds": 1}})
    task_id = created["result"]["taskId"]
    forged = _forged(task_id)
    rid = modern.send_request("subscriptions/listen", {"notifications": {"taskIds": [task_id, forged]},
                                                       "_meta": modern_meta()})
    ack = modern.next_incoming(BOUND, "notifications/subscriptions/acknowledged")
    assert ack["params"]["notifications"]["taskIds"] == [task_id]

    def completed():
        note = modern.next_incoming(BOUND, "notifications/tasks")
        assert note["params"]["taskId"] == task_id, note
        return note if note["params"]["status"] == "completed" else None
    note = wait_until(completed, BOUND, "notifications/tasks with status completed")
    assert note["params"]["result"]["content"][0]["text"] == "3"
    modern.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}})
