"""troupe served over HTTP: SDK clients on both transports, the wire rules, status."""
from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
import requests
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client

from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import server

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}



def _body(resp) -> dict:
    """The JSON-RPC answer of a POST, whether it came as JSON or as an SSE stream."""
    if resp.headers["Content-Type"].startswith("application/json"):
        return resp.json()
    data = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_sdk_client_over_streamable_http_and_legacy_sse(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo"), server("demo", "tests.servers.fastmcp_demo")], mode="flat")

    async def streamable():
        async with Client(t.url, mode="legacy") as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo__echo", "demo__greet", "core_status"} <= names
            result = await client.call_tool("echo__add", {"a": 1, "b": 2})
            assert result.structured_content == {"sum": 3}
            results = await asyncio.gather(*(client.call_tool("echo__echo", {"text": str(i)}) for i in range(20)))
            assert [r.content[0].text for r in results] == [str(i) for i in range(20)]

    async def legacy_sse():
        async with sse_client(t.base + "/sse") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert "demo__multiply" in names
                result = await session.call_tool("demo__multiply", {"a": 3, "b": 4})
                assert result.structured_content == {"result": 12.0}
    _run(streamable())
    _run(legacy_sse())


def test_wire_rules_sessions_versions_and_notifications(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    with requests.Session() as s:
        init = s.post(t.url, json=INIT, headers=ACCEPT, timeout=10)
        # the client takes both: troupe answers on an SSE stream, as the reference servers do
        assert init.status_code == 200 and init.headers["Content-Type"].startswith("text/event-stream")
        assert _body(init)["result"]["serverInfo"]["name"] == "troupe"
        json_only = s.post(t.url, json=INIT, headers={**ACCEPT, "Accept": "application/json"}, timeout=10)
        assert json_only.headers["Content-Type"].startswith("application/json")
        sid = init.headers["Mcp-Session-Id"]
        h = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        note = s.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h, timeout=10)
        assert note.status_code == 202 and note.content == b""
        listed = s.post(t.url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=h, timeout=20)
        assert any(tool["name"] == "echo__echo" for tool in _body(listed)["result"]["tools"])
        bad_version = s.post(t.url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
                             headers={**h, "MCP-Protocol-Version": "1999-01-01"}, timeout=10)
        assert bad_version.status_code == 400
        unknown = s.post(t.url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"},
                         headers={**h, "Mcp-Session-Id": "nope"}, timeout=10)
        assert unknown.status_code == 404
        missing = s.post(t.url, json={"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers=ACCEPT, timeout=10)
        assert missing.status_code == 400
        garbage = s.post(t.url, data=b"{nope", headers=h, timeout=10)
        assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
        assert s.delete(t.url, headers=h, timeout=10).status_code == 200
        gone = s.post(t.url, json={"jsonrpc": "2.0", "id": 6, "method": "ping"}, headers=h, timeout=10)
        assert gone.status_code == 404


def test_origin_host_and_token_rejections_on_the_wire(http_troupe):
    t = http_troupe([], auth_token="s3cret-token")
    auth = {**ACCEPT, "Authorization": "Bearer s3cret-token"}
    assert requests.post(t.url, json=INIT, headers=ACCEPT, timeout=10).status_code == 401
    assert requests.post(t.url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer wrong"}, timeout=10).status_code == 401
    assert requests.get(t.base + "/status", timeout=10).status_code == 401
    assert requests.post(t.url, json=INIT, headers={**auth, "Origin": "http://evil.example"}, timeout=10).status_code == 403
    assert requests.post(t.url, json=INIT, headers={**auth, "Host": "evil.example"}, timeout=10).status_code == 403
    # Another local port is another origin (any dev server): equality with troupe's own, not "is loopback".
    assert requests.post(t.url, json=INIT, headers={**auth, "Origin": "http://localhost:3000"}, timeout=10).status_code == 403
    ok = requests.post(t.url, json=INIT, headers={**auth, "Origin": t.base}, timeout=10)
    assert ok.status_code == 200
    assert "s3cret-token" not in "".join(t.stderr)


def test_status_endpoint_and_cli(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo"), server("broken", "tests.servers.crash_on_start")])
    wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["ready"], 20, message="ready")
    report = requests.get(t.base + "/status", timeout=5).json()
    assert report["url"] == t.url and report["uptime_s"] > 0
    by_name = {s["name"]: s for s in report["servers"]}
    assert by_name["echo"]["state"] == "ready" and by_name["echo"]["pid"]
    assert by_name["broken"]["state"] in ("backoff", "failed", "starting")
    one = requests.get(t.base + "/status/servers/echo", timeout=5)
    assert one.status_code == 200 and one.json()["name"] == "echo"
    assert requests.get(t.base + "/status/servers/nope", timeout=5).status_code == 404
    table = subprocess.run([PYTHON, "-m", "actors.main", "status", "--url", t.url], cwd=ROOT,
                           capture_output=True, text=True, timeout=30)
    assert "echo" in table.stdout and "ready" in table.stdout and "SERVER" in table.stdout
    raw = subprocess.run([PYTHON, "-m", "actors.main", "status", "--url", t.base, "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert json.loads(raw.stdout)["servers"][0]["name"] == "echo"


def test_events_stream_shows_state_changes(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")])
    with requests.get(t.base + "/events", stream=True, timeout=10) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        seen = []
        for raw in resp.iter_lines():
            if raw.startswith(b"data: "):
                seen.append(json.loads(raw[6:]))
                if any(e["type"] == "ServerStateChanged" and e.get("new") == "ready" for e in seen):
                    break
        assert any(e["type"] == "ServerStateChanged" for e in seen)


def test_deleting_a_session_answers_its_open_calls_at_once(http_troupe):
    import threading
    import time
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    with requests.Session() as s:
        init = s.post(t.url, json=INIT, headers=ACCEPT, timeout=10)
        h = {**ACCEPT, "Mcp-Session-Id": init.headers["Mcp-Session-Id"]}
        s.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h, timeout=10)
        box = {}

        def slow_call():
            box["response"] = requests.post(t.url, json={"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
                "name": "echo__sleep", "arguments": {"seconds": 60}}}, headers=h, timeout=30)
        caller = threading.Thread(target=slow_call)
        caller.start()
        wait_until(lambda: requests.get(t.base + "/status/servers/echo", timeout=5).json()["in_flight"] == 1, 20,
                   message="call in flight")
        started = time.monotonic()
        assert s.delete(t.url, headers=h, timeout=10).status_code == 200
        caller.join(timeout=15)
        assert not caller.is_alive() and time.monotonic() - started < 10
        answer = _body(box["response"])
        assert answer["id"] == 7 and "session closed" in answer["error"]["message"]
        wait_until(lambda: requests.get(t.base + "/status/servers/echo", timeout=5).json()["in_flight"] == 0, 10,
                   message="upstream call cancelled")
