"""troupe's HTTP front for MCP 2026-07-28 (modern, stateless), on the wire and with the official
Python SDK: header rules, status codes, no sessions, cancellation by closing, listen, both eras
side by side, and the front door's limits on the modern path too."""
from __future__ import annotations

import asyncio
import json
import socket

import requests
from mcp import Client

from tests.support import wait_until
from tests.support.troupe import server

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "wire-test", "version": "1"}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

SUB = "io.modelcontextprotocol/subscriptionId"


def _request(rid, method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}


def _headers(method: str, name: str | None = None, **extra) -> dict:
    h = {**ACCEPT, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, **extra}
    if name is not None:
        h["Mcp-Name"] = name
    return h


def _post(t, body: dict, headers: dict) -> requests.Response:
    return requests.post(t.url, json=body, headers=headers, timeout=30)


def _body(resp) -> dict:
    """The JSON-RPC answer, whether it came as JSON or as an SSE stream."""
    if resp.headers["Content-Type"].startswith("application/json"):
        return resp.json()
    return json.loads([line[6:] for line in resp.text.splitlines() if line.startswith("data: ")][-1])


def _raw_post(url: str, body: dict, headers: dict) -> socket.socket:
    """A POST on a raw socket, so the test decides when the client hangs up."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)), timeout=15)
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(data)}\r\n{head}\r\n".encode()
                 + data)
    return sock


def _in_flight(t) -> int | None:
    """Calls in flight to echo; None while troupe refuses the asking connection (all slots held)."""
    answer = requests.get(t.base + "/status/servers/echo", timeout=5)
    return answer.json()["in_flight"] if answer.status_code == 200 else None


def test_header_rules_status_codes_and_no_session(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    listed = _post(t, _request(1, "tools/list"), _headers("tools/list"))
    assert listed.status_code == 200 and "Mcp-Session-Id" not in listed.headers
    assert any(tool["name"] == "echo__echo" for tool in _body(listed)["result"]["tools"])
    called = _post(t, _request("c", "tools/call", name="echo__echo", arguments={"text": "hi"}),
                   _headers("tools/call", "echo__echo", **{"Mcp-Session-Id": "ignored-if-sent"}))
    assert called.status_code == 200 and "Mcp-Session-Id" not in called.headers
    answer = _body(called)
    assert answer["id"] == "c" and answer["result"]["content"] == [{"type": "text", "text": "hi"}]

    call = _request(2, "tools/call", name="echo__echo", arguments={"text": "x"})
    mismatches = {
        "version": _headers("tools/call", "echo__echo", **{"MCP-Protocol-Version": "2025-11-25"}),
        "method": _headers("tools/list", "echo__echo"),
        "method missing": {k: v for k, v in _headers("tools/call", "echo__echo").items() if k != "Mcp-Method"},
        "name": _headers("tools/call", "echo__add"),
        "name missing": _headers("tools/call"),
    }
    for what, headers in mismatches.items():
        answer = _post(t, call, headers)
        if what == "version":  # a legacy version header takes the session path, which wants a session
            assert answer.status_code == 400, what
            continue
        assert answer.status_code == 400 and answer.headers["Content-Type"] == "application/json", what
        assert answer.json()["error"]["code"] == -32020 and answer.json()["id"] == 2, what
    wrong_meta = _request(3, "tools/list")
    wrong_meta["params"]["_meta"] = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    answer = _post(t, wrong_meta, _headers("tools/list"))
    assert answer.status_code == 400 and answer.json()["error"]["code"] == -32020
    future = _request(8, "tools/list")
    future["params"]["_meta"] = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    newer = _post(t, future, _headers("tools/list", **{"MCP-Protocol-Version": "2099-01-01"}))
    assert newer.status_code == 400 and newer.json()["error"]["code"] == -32022  # the Session's answer
    assert MODERN in newer.json()["error"]["data"]["supported"]
    read = _post(t, _request(4, "resources/read", uri="file:///nope"), _headers("resources/read", "file:///other"))
    assert read.status_code == 400 and read.json()["error"]["code"] == -32020

    unknown = _post(t, _request(5, "no/such/method"), _headers("no/such/method"))
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == -32601 and unknown.json()["id"] == 5
    for verb in ("GET", "DELETE"):
        refused = requests.request(verb, t.url, headers=_headers("tools/list"), timeout=10)
        assert refused.status_code == 405 and refused.headers["Allow"] == "POST", verb
    note = _post(t, {"jsonrpc": "2.0", "method": "notifications/initialized"}, _headers("notifications/initialized"))
    assert note.status_code == 202
    batch = _post(t, [_request(6, "tools/list")], _headers("tools/list"))  # type: ignore[arg-type]
    assert batch.status_code == 400 and batch.json()["error"]["code"] == -32600
    status = requests.get(t.base + "/status", timeout=5).json()
    assert status["sessions"]["open"] == 0 and status["modern"] == {"in_flight": 0, "listening": 0}


def test_legacy_sessions_work_beside_modern_requests(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    with requests.Session() as s:
        init = s.post(t.url, json=INIT, headers=ACCEPT, timeout=10)
        sid = init.headers["Mcp-Session-Id"]
        h = {**ACCEPT, "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        s.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h, timeout=10)
        modern = _post(t, _request(1, "tools/call", name="echo__echo", arguments={"text": "modern"}),
                       _headers("tools/call", "echo__echo"))
        legacy = s.post(t.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo__echo", "arguments": {"text": "legacy"}}}, headers=h, timeout=10)
        assert _body(modern)["result"]["content"][0]["text"] == "modern"
        assert _body(legacy)["result"]["content"][0]["text"] == "legacy"
        assert legacy.headers["Mcp-Session-Id"] == sid
        ping = s.post(t.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=h, timeout=10)
        assert _body(ping) == {"jsonrpc": "2.0", "id": 2, "result": {}}
        assert requests.get(t.base + "/status", timeout=5).json()["sessions"]["open"] == 1
        assert s.delete(t.url, headers=h, timeout=10).status_code == 200


def test_closing_the_response_cancels_the_call_upstream(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], "--log-level", "DEBUG", mode="flat")
    for accept in ("application/json", "application/json, text/event-stream"):
        sock = _raw_post(t.url, _request(7, "tools/call", name="echo__sleep", arguments={"seconds": 60}),
                         _headers("tools/call", "echo__sleep", Accept=accept))
        wait_until(lambda: _in_flight(t) == 1, 20, message="the call in flight")
        seen = sum("cancelled" in line for line in t.stderr)
        sock.close()
        wait_until(lambda seen=seen: sum("cancelled" in line for line in t.stderr) > seen, 10,
                   message="the upstream to see notifications/cancelled")
        wait_until(lambda: _in_flight(t) == 0, 10, message="the call ended")


def test_front_door_checks_hold_for_modern_requests(http_troupe):
    t = http_troupe([], auth_token="s3cret-token")
    body, h = _request(1, "tools/list"), _headers("tools/list")
    assert _post(t, body, h).status_code == 401
    auth = {**h, "Authorization": "Bearer s3cret-token"}
    assert _post(t, body, {**auth, "Origin": "http://evil.example"}).status_code == 403
    assert _post(t, body, {**auth, "Host": "evil.example"}).status_code == 403
    assert requests.post(t.url, data=json.dumps(body), headers={**auth, "Content-Type": "text/plain"},
                         timeout=10).status_code == 415
    assert _post(t, body, auth).status_code == 200


def test_listen_is_acknowledged_on_a_stream(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    body = _request("L", "subscriptions/listen", notifications={"toolsListChanged": True})
    sock = _raw_post(t.url, body, _headers("subscriptions/listen"))
    reader = sock.makefile("rb")
    head = []
    for raw in reader:
        line = raw.decode().rstrip("\r\n")
        if not line:
            break
        head.append(line.lower())
    assert head[0].startswith("http/1.1 200") and "content-type: text/event-stream" in head
    assert "x-accel-buffering: no" in head
    data = next(raw.decode()[6:] for raw in reader if raw.startswith(b"data: "))
    ack = json.loads(data)
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"][SUB] == "L" and ack["params"]["notifications"].get("toolsListChanged") is True
    sock.shutdown(socket.SHUT_RDWR)
    sock.close()
    wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["modern"]["listening"] == 0, 10,
               message="the listen to end with its client")


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def test_sdk_client_legacy_mode_over_streamable_http(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")

    async def legacy():
        async with Client(t.url, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            result = await client.call_tool("echo__echo", {"text": "old"})
            assert result.content[0].text == "old"
    _run(legacy())


def test_sdk_client_auto_mode_negotiates_2026_07_28(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")

    async def auto():
        async with Client(t.url) as client:  # mode="auto" is the default: server/discover first
            assert client.protocol_version == MODERN
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "echo__echo" in names
            result = await client.call_tool("echo__echo", {"text": "new"})
            assert result.content[0].text == "new"
        async with Client(t.url, mode=MODERN) as client:  # adopts the version with no probe
            assert (await client.call_tool("echo__add", {"a": 2, "b": 3})).structured_content == {"sum": 5}
    _run(auto())
    assert requests.get(t.base + "/status", timeout=5).json()["sessions"]["open"] == 0




def test_modern_calls_count_against_max_connections_and_a_slow_head_is_cut(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", max_connections=3, header_timeout=3)
    host, port = t.base.split("//")[1].split(":")
    calls = [_raw_post(t.url, _request(i, "tools/call", name="echo__sleep", arguments={"seconds": 60}),
                       _headers("tools/call", "echo__sleep", Accept="application/json")) for i in range(2)]

    def hold_the_last_slot() -> socket.socket | None:
        """A connection sending a head that never ends; None while an earlier one still holds the slot."""
        sock = socket.create_connection((host, int(port)), timeout=1.0)
        sock.sendall(b"POST /mcp HTTP/1.1\r\nMCP-Protocol-Version: 2026-07-28\r\n")
        try:
            refused = sock.recv(1024)
        except socket.timeout:  # accepted: troupe waits for the rest of the head
            sock.settimeout(10)
            return sock
        assert refused.startswith(b"HTTP/1.1 503 "), refused
        sock.close()
        return None
    try:
        wait_until(lambda: _in_flight(t) == 2, 20, message="two modern calls in flight")
        def fourth_served() -> bool:
            """A newcomer: 503 while the slow head is within its grace, served once it is past it."""
            with socket.create_connection((host, int(port)), timeout=10) as fourth:
                fourth.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % int(port))
                answer = fourth.recv(1024)
            assert answer.startswith((b"HTTP/1.1 200 ", b"HTTP/1.1 503 ")), answer
            return answer.startswith(b"HTTP/1.1 200 ")
        with wait_until(hold_the_last_slot, 10, message="the last connection slot") as third:
            # The two calls and the slow head hold all 3: the slow head makes room for a newcomer.
            wait_until(fourth_served, 10, 0.1, "a newcomer served in the slow head's place")
            assert third.recv(1024) == b""  # cut, unanswered
        wait_until(lambda: _in_flight(t) == 2, 10, message="the calls, never cut, still in flight")
    finally:
        for sock in calls:
            sock.close()
    wait_until(lambda: _in_flight(t) == 0, 10, message="both calls cancelled by their closed connections")
