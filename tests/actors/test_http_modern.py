"""The HTTP front's stateless (MCP 2026-07-28) path in-process, against the real Session and a
real echo upstream: ids renamed per request, closing the response cancels, shutdown ends what is
open, Mcp-Param-* checked against the tool troupe lists, and the framing of a listen stream."""
from __future__ import annotations

import json
import socket

import gevent
import pykka
import pytest
import requests

from actors.downstream.session import Session
from actors.messages import ClientMessage
from actors.protocol import jsonrpc
from actors.runtime import Runtime
from actors.serve import modern_http, sse_framing
from actors.serve.http import listen
from actors.settings import config
from tests.support import PYTHON, ROOT, wait_until

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
SUB = "io.modelcontextprotocol/subscriptionId"


def _server(name: str, module: str) -> dict:
    return {"name": name, "timeout": 30, "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", module], "work_dir": str(ROOT)}}}


@pytest.fixture
def front():
    cfg = config.from_data({"servers": [_server("echo", "tests.servers.echo"),
                                        _server("params", "tests.servers.param_headers")],
                            "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.catalogue().tool("params__route") is not None and rt.catalogue().tool("echo__sleep"),
               15, message="both upstreams listed")
    server, app, url = listen(rt, "127.0.0.1", 0)
    yield rt, app, url
    app.close()
    server.stop(timeout=1.0)
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _request(rid, method: str, params: dict | None = None) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": META}}


def _headers(method: str, name: str | None = None, sse: bool = False, **extra) -> dict:
    h = {"Content-Type": "application/json", "MCP-Protocol-Version": MODERN, "Mcp-Method": method,
         "Accept": "application/json, text/event-stream" if sse else "application/json", **extra}
    if name is not None:
        h["Mcp-Name"] = name
    return h


def _call(url, rid, tool: str, arguments: dict, **extra):
    return requests.post(url, json=_request(rid, "tools/call", {"name": tool, "arguments": arguments}),
                         headers=_headers("tools/call", tool, **extra), timeout=20)


def _raw_post(url: str, body: dict, headers: dict) -> socket.socket:
    """A POST on a raw socket, so the test decides when the client hangs up."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    data = json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    sock.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Length: {len(data)}\r\n{head}\r\n".encode()
                 + data)
    return sock


def _in_flight(rt, server: str) -> int:
    return next(s for s in rt.status()["servers"] if s["name"] == server)["in_flight"]


def test_two_clients_may_use_the_same_request_id_at_once(front):
    rt, app, url = front
    slow = gevent.spawn(_call, url, 1, "echo__sleep", {"seconds": 0.5})
    wait_until(lambda: _in_flight(rt, "echo") == 1, 10, message="the slow call in flight")
    fast = _call(url, 1, "echo__echo", {"text": "second"})
    assert fast.status_code == 200 and "Mcp-Session-Id" not in fast.headers
    assert fast.json()["id"] == 1 and fast.json()["result"]["content"] == [{"type": "text", "text": "second"}]
    answer = slow.get(timeout=15).json()
    assert answer["id"] == 1 and answer["result"]["content"][0]["text"] == "slept"
    assert app.mcp.sessions.summary()["open"] == 0  # no session table entry for either
    assert app.mcp.modern.summary() == {"in_flight": 0, "listening": 0}


def test_closing_the_response_cancels_the_call_upstream(front):
    rt, app, url = front
    for accept_sse in (False, True):  # a JSON answer and an SSE answer alike
        sock = _raw_post(url, _request(9, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 30}}),
                         _headers("tools/call", "echo__sleep", sse=accept_sse))
        wait_until(lambda: _in_flight(rt, "echo") == 1, 10, message="the call in flight")
        sock.close()
        wait_until(lambda: _in_flight(rt, "echo") == 0, 10, message="the call cancelled upstream")
        wait_until(lambda: app.mcp.modern.summary()["in_flight"] == 0, 5, message="the front to forget it")


def test_shutdown_answers_an_open_request(front):
    rt, app, url = front
    pending = gevent.spawn(_call, url, "x", "echo__sleep", {"seconds": 30})
    wait_until(lambda: _in_flight(rt, "echo") == 1, 10, message="the call in flight")
    app.mcp.close()
    answer = pending.get(timeout=5)
    assert answer.status_code == 503 and answer.json()["id"] == "x"
    assert "shutting down" in answer.json()["error"]["message"]
    refused = _call(url, 2, "echo__echo", {"text": "late"})
    assert refused.status_code == 503


def test_mcp_param_headers_must_match_the_arguments_of_the_tool_troupe_lists(front):
    rt, app, url = front
    tool = "params__route"
    assert rt.catalogue().tool(tool).definition["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
    ok = _call(url, 1, tool, {"region": "eu", "shard": 3, "dry": True},
               **{"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "3", "Mcp-Param-Dry": "true"})
    assert ok.status_code == 200 and ok.json()["result"]["content"][0]["text"] == "routed to eu"
    zurich = "Zürich"
    encoded = _call(url, 2, tool, {"region": zurich}, **{"Mcp-Param-Region": "=?base64?WsO8cmljaA==?="})
    assert encoded.status_code == 200 and encoded.json()["result"]["content"][0]["text"] == f"routed to {zurich}"
    for arguments, headers in (({"region": "eu"}, {"Mcp-Param-Region": "us"}),  # disagrees
                               ({"region": "eu"}, {}),  # missing
                               ({"region": "eu"}, {"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "1"}),  # no such arg
                               ({"region": "eu", "shard": 2}, {"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "3"}),
                               ({"region": "eu"}, {"Mcp-Param-Region": "=?base64?!!?="})):  # malformed
        bad = _call(url, 3, tool, arguments, **headers)
        assert bad.status_code == 400, (arguments, headers, bad.text)
        assert bad.json()["error"]["code"] == -32020 and bad.json()["id"] == 3
    assert _in_flight(rt, "params") == 0


class _ListeningSession(Session):
    """Stands in for the modern Session's `subscriptions/listen` (another part of issue 15):
    acknowledges on the request's sink, with the subscription id, then holds it open. Everything
    else is the real Session. Records the cancellations the front tells it."""

    cancelled: list = []

    def on_receive(self, message):
        if isinstance(message, ClientMessage) and isinstance(message.message, dict):
            msg = message.message
            if msg.get("method") == "subscriptions/listen":
                message.sink(jsonrpc.notification("notifications/subscriptions/acknowledged", {
                    "notifications": {"toolsListChanged": True}, "_meta": {SUB: msg["id"]}}))
                return
            if msg.get("method") == "notifications/cancelled":
                _ListeningSession.cancelled.append(msg["params"]["requestId"])
        return super().on_receive(message)


def _sse_lines(sock: socket.socket):
    """The response to a raw POST, line by line (headers first)."""
    reader = sock.makefile("rb")
    for raw in reader:
        yield raw.decode().rstrip("\r\n")


def test_a_listen_stream_is_acknowledged_kept_alive_and_ended_gracefully(front, monkeypatch):
    rt, app, url = front
    monkeypatch.setattr(modern_http, "Session", _ListeningSession)
    monkeypatch.setattr(sse_framing, "KEEPALIVE_S", 0.2)
    _ListeningSession.cancelled = []
    body = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
    sock = _raw_post(url, body, _headers("subscriptions/listen", sse=True))
    lines = _sse_lines(sock)
    head = []
    for line in lines:
        if not line:
            break
        head.append(line.lower())
    assert head[0].startswith("http/1.1 200") and "content-type: text/event-stream" in head
    assert "x-accel-buffering: no" in head and not any(h.startswith("mcp-session-id") for h in head)
    data = next(line for line in lines if line.startswith("data: "))
    ack = json.loads(data[6:])
    assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["_meta"][SUB] == "L1"
    assert next(line for line in lines if line.startswith(":")) == ": keepalive"
    assert app.mcp.modern.summary() == {"in_flight": 1, "listening": 1}
    app.mcp.close()  # troupe stops: the listen ends with its result, not a cut
    final = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
    assert final["id"] == "L1" and final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"][SUB] == "L1"
    sock.close()


def test_closing_a_listen_stream_tells_the_session_to_cancel_it(front, monkeypatch):
    rt, app, url = front
    monkeypatch.setattr(modern_http, "Session", _ListeningSession)
    _ListeningSession.cancelled = []
    body = {"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen", "params": {"notifications": {}, "_meta": META}}
    sock = _raw_post(url, body, _headers("subscriptions/listen", sse=True))
    lines = _sse_lines(sock)
    assert json.loads(next(line for line in lines if line.startswith("data: "))[6:])["params"]["_meta"][SUB] == 5
    sock.shutdown(socket.SHUT_RDWR)  # the reader's file holds the socket open past close()
    sock.close()
    wait_until(lambda: _ListeningSession.cancelled, 5, message="the Session told of the cancel")
    assert len(_ListeningSession.cancelled) == 1 and _ListeningSession.cancelled[0] != 5  # troupe's own id
    wait_until(lambda: app.mcp.modern.summary()["listening"] == 0, 5, message="the front to forget the listen")


def test_listen_needs_an_sse_accept(front):
    rt, app, url = front
    answer = requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                                      "params": {"notifications": {}, "_meta": META}},
                           headers=_headers("subscriptions/listen"), timeout=10)
    assert answer.status_code == 406


def test_a_call_whose_session_died_is_answered_and_the_next_gets_a_new_session(front, monkeypatch):
    rt, app, url = front
    monkeypatch.setattr(modern_http, "SESSION_CHECK_S", 0.2)
    pending = gevent.spawn(_call, url, 4, "echo__sleep", {"seconds": 30})
    wait_until(lambda: _in_flight(rt, "echo") == 1, 10, message="the call in flight")
    first = app.mcp.modern._sessions.get(None)
    first.stop()  # as if it crashed: no answer will come from it
    answer = pending.get(timeout=5)
    assert answer.json()["id"] == 4 and "session stopped" in answer.json()["error"]["message"]
    again = _call(url, 5, "echo__echo", {"text": "back"})
    assert again.json()["result"]["content"][0]["text"] == "back"
    assert app.mcp.modern._sessions.get(None) is not first


def test_a_modern_request_without_its_envelope_is_refused_at_the_front(front):
    rt, app, url = front
    # The version header makes it a modern request; without _meta naming a version it would be
    # served as if from a legacy session. The spec checks the envelope first: -32602, HTTP 400.
    for params in ({}, {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}):
        for method in ("server/discover", "tools/list"):
            answer = requests.post(url, json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params},
                                   headers=_headers(method), timeout=10)
            assert answer.status_code == 400, (method, params, answer.text)
            assert answer.json()["id"] == 7 and answer.json()["error"]["code"] == jsonrpc.INVALID_PARAMS
    # A header-less server/discover is an era probe, answered without an envelope.
    probe = requests.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "server/discover"},
                          headers={"Content-Type": "application/json", "Accept": "application/json"}, timeout=10)
    assert probe.status_code == 200 and MODERN in probe.json()["result"]["supportedVersions"]


def test_initialize_sent_as_a_modern_request_is_method_not_found(front):
    rt, app, url = front
    answer = requests.post(url, json=_request(3, "initialize"), headers=_headers("initialize"), timeout=10)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
    assert "Mcp-Session-Id" not in answer.headers
    # The legacy handshake is untouched: it opens a session.
    handshake = requests.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}, timeout=10)
    assert handshake.status_code == 200 and handshake.headers.get("Mcp-Session-Id")


def test_a_call_sent_to_a_session_that_died_unnoticed_is_served_by_a_new_one(front):
    rt, app, url = front
    assert _call(url, 1, "echo__echo", {"text": "first"}).json()["result"]["content"][0]["text"] == "first"
    first = app.mcp.modern._sessions.get(None)
    first.stop()  # dies between requests: the front learns it only when the next tell fails
    again = _call(url, 2, "echo__echo", {"text": "again"})
    assert again.json()["id"] == 2 and again.json()["result"]["content"][0]["text"] == "again"
    assert app.mcp.modern._sessions.get(None) is not first
