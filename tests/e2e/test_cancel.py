"""Cancel means cancel: a cancelled call gets no answer, is never sent again, and holds nothing.

- A resources/read whose server died under it waits in the Session's call table for the
  restart; cancelled meanwhile, it is neither answered nor read upstream a second time.
- Legacy-era POSTs whose calls are cancelled and whose clients then hang up free their
  connections at once: fifty of them through a front capped at 25 connections lock nobody out.
"""
from __future__ import annotations

import json
import time

import requests

from tests.e2e.test_modern_http import _raw_post
from tests.support import wait_until
from tests.support.troupe import server

READ = "first-call-crashes: read flaky://doc"
MAX_CONNECTIONS = 25
ABANDONED = 50
FREED_WITHIN_S = 1.0
JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_a_read_cancelled_while_its_server_restarts_is_never_answered_nor_sent_again(make, tmp_path):
    marker = str(tmp_path / "crashed")
    # a restart that takes a second: the read waits in the call table meanwhile
    t = make([server("flaky", "tests.servers.first_call_crashes", "--marker", marker,
                     restart={"min_backoff": 1.0, "max_backoff": 1.0})])
    rid = t.send_request("resources/read", {"uri": "flaky://doc"})
    wait_until(lambda: any(READ in line for line in t.stderr), 10, message="the read reached the server")
    wait_until(lambda: t.server_status("flaky")["state"] != "ready", 10, message="the server died under it")
    t.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "user"}})
    wait_until(lambda: t.server_status("flaky")["restarts"] == 1 and t.server_status("flaky")["state"] == "ready",
               15, message="the server back")
    # a read sent now is the server's second one: the cancelled read was not sent again before it
    assert t.request("resources/read", {"uri": "flaky://doc"}, timeout=30)["result"]["contents"][0]["text"] == "the doc"
    # the server's stderr reaches troupe's log beside, not before, the answer: read it once it has come
    wait_until(lambda: sum(READ in line for line in t.stderr) >= 2, 10, message="the second read's log line")
    assert sum(READ in line for line in t.stderr) == 2
    assert not any(m.get("id") == rid for m in t.received)  # no answer to the cancelled request


def _answer(resp: requests.Response) -> dict:
    """The JSON-RPC answer of a POST, as JSON or as its SSE stream's last event."""
    if resp.headers["Content-Type"].startswith("application/json"):
        return resp.json()
    return json.loads([line[6:] for line in resp.text.splitlines() if line.startswith("data: ")][-1])


def _status(t) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def test_cancelled_and_abandoned_posts_free_their_connections(http_troupe):
    t = http_troupe([server("hang", "tests.servers.hang")], mode="flat", max_connections=MAX_CONNECTIONS)
    init = requests.post(t.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        headers=JSON, timeout=30)
    headers = {**JSON, "Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    requests.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=10)
    wait_until(lambda: _status(t)["servers"][0]["state"] == "ready", 30, message="hang ready")
    batch = 10  # open at once, well under the cap (the cancels and the status polls need connections too)
    for first in range(1, ABANDONED + 1, batch):
        ids = range(first, first + batch)
        call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "hang__hang", "arguments": {}}}
        socks = [_raw_post(t.url, {**call, "id": rid}, headers) for rid in ids]
        wait_until(lambda: _status(t)["servers"][0]["in_flight"] == batch, 10, message=f"{batch} calls in flight")
        for rid in ids:
            assert requests.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
                "requestId": rid, "reason": "user"}}, headers=headers, timeout=10).status_code == 202
        for sock in socks:
            # cancelled: the POST ends at once, with no answer (its stream closes) ...
            sock.settimeout(FREED_WITHIN_S + 1)
            head = sock.recv(65536)
            assert b"HTTP/1.1 202" in head or b"HTTP/1.1 200" in head, head[:200]
            assert b'"id"' not in head  # no JSON-RPC answer to a cancelled request
            sock.close()  # ... and then its client hangs up
    began = time.monotonic()
    wait_until(lambda: _status(t)["connections"]["open"] <= 2 and _status(t)["servers"][0]["in_flight"] == 0,
               FREED_WITHIN_S + 1, message="every abandoned POST's connection freed")
    assert time.monotonic() - began <= FREED_WITHIN_S + 1
    pong = requests.post(t.url, json={"jsonrpc": "2.0", "id": 99, "method": "ping"}, headers=headers, timeout=10)
    assert _answer(pong) == {"jsonrpc": "2.0", "id": 99, "result": {}}


def test_a_client_that_hangs_up_cancels_its_call(http_troupe):
    t = http_troupe([server("hang", "tests.servers.hang")], mode="flat")
    init = requests.post(t.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        headers=JSON, timeout=30)
    headers = {**JSON, "Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    wait_until(lambda: _status(t)["servers"][0]["state"] == "ready", 30, message="hang ready")
    sock = _raw_post(t.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                             "params": {"name": "hang__hang", "arguments": {}}}, headers)
    wait_until(lambda: _status(t)["servers"][0]["in_flight"] == 1, 10, message="the call in flight")
    sock.close()
    wait_until(lambda: _status(t)["servers"][0]["in_flight"] == 0, FREED_WITHIN_S + 1,
               message="the call cancelled upstream when its client hung up")
