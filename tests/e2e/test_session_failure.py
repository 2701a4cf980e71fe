"""A failing actor answers what it holds: a Session forced to fail (tests/support/failing_troupe
plants the fault) answers every call it holds at once, on every front, and each front carries
on: stdio answers every open request and serves on with a fresh Session negotiated as before; a
legacy HTTP session ends (its POSTs answered, its SSE stream closed); the modern front replaces
its Session. A fault in one request's handler fails that request alone, on the modern front too,
where callers share a Session."""
from __future__ import annotations

import json
import threading
import time

import requests

from tests.support import wait_until
from tests.support.faults import HANDLER_FAULT, SESSION_FAULT
from tests.support.troupe import Troupe, TroupeHttp, server, text_of, write_config

FAILING = "tests.support.failing_troupe"
ANSWERED_WITHIN_S = 1.0  # every open call answered this soon after the Session failed
SLOW = {"name": "echo__sleep", "arguments": {"seconds": 20}}
INTERNAL_ERROR = -32603
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "failure-test", "version": "1"}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _config(tmp_path, **serve):
    return write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat", **serve)


def _internal_error(answer: dict) -> str:
    assert answer["error"]["code"] == INTERNAL_ERROR, answer
    return answer["error"]["message"]


def _wait_in_flight(status, count: int = 1) -> None:
    wait_until(lambda: status() >= count, 10, message=f"{count} call(s) in flight to echo")


def test_stdio_answers_every_open_request_and_serves_on_with_the_same_negotiation(tmp_path):
    t = Troupe(_config(tmp_path), module=FAILING)
    try:
        t.initialize()
        t.request("tools/list", timeout=30)
        contained = t.call(HANDLER_FAULT)
        assert "troupe internal error" in _internal_error(contained)  # one request, nothing else
        assert text_of(t.call("echo__echo", {"text": "still one session"})) == "still one session"
        slow = t.send_request("tools/call", SLOW)
        _wait_in_flight(lambda: t.server_status("echo")["in_flight"])
        failed_at = time.monotonic()
        boom = t.send_request("tools/call", {"name": SESSION_FAULT, "arguments": {}})
        answers = [t.wait_response(slow, 5), t.wait_response(boom, 5)]
        assert time.monotonic() - failed_at < ANSWERED_WITHIN_S + 0.5  # the test's own round trips on top
        assert all("troupe" in _internal_error(a) for a in answers)
        # served on, without a new initialize: the fresh Session was told the client's handshake
        assert text_of(t.call("echo__echo", {"text": "after"})) == "after"
        wait_until(lambda: any("serving on with a fresh session" in line for line in t.stderr), 5,
                   message="the failure logged")
        assert t.proc.poll() is None
        # the upstream heard the abandoned call's cancellation
        wait_until(lambda: t.server_status("echo")["in_flight"] == 0, 10, message="the slow call cancelled upstream")
    finally:
        assert t.close() == 0


def _session_post(url: str, headers: dict, body: dict, out: list) -> None:
    out.append(requests.post(url, json=body, headers=headers, timeout=30))


def _echo_in_flight(t) -> int:
    return requests.get(t.base + "/status/servers/echo", timeout=5).json()["in_flight"]


def test_a_legacy_http_session_whose_session_failed_is_answered_and_ends(tmp_path):
    t = TroupeHttp(_config(tmp_path, json_response=True), module=FAILING)
    try:
        init = requests.post(t.url, json=INIT, headers=JSON, timeout=30)
        headers = {**JSON, "Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
        requests.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers, timeout=10)
        slow: list = []
        worker = threading.Thread(target=_session_post, args=(t.url, headers, {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": SLOW}, slow))
        worker.start()
        _wait_in_flight(lambda: _echo_in_flight(t))
        failed_at = time.monotonic()
        boom = requests.post(t.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                          "params": {"name": SESSION_FAULT, "arguments": {}}}, headers=headers, timeout=10)
        worker.join(timeout=5)
        assert not worker.is_alive() and time.monotonic() - failed_at < ANSWERED_WITHIN_S + 0.5
        assert "troupe" in _internal_error(slow[0].json()) and "troupe" in _internal_error(boom.json())
        # the session ended with its actor: the client initializes again, and that works
        gone = requests.post(t.url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=headers, timeout=10)
        assert gone.status_code == 404
        again = requests.post(t.url, json=INIT, headers=JSON, timeout=10)
        assert again.status_code == 200 and "Mcp-Session-Id" in again.headers
    finally:
        assert t.stop() == 0


def test_a_legacy_sse_session_whose_session_failed_gets_its_answers_and_its_stream_closes(tmp_path):
    t = TroupeHttp(_config(tmp_path), module=FAILING)
    try:
        stream = requests.get(t.base + "/sse", headers={"Accept": "text/event-stream"}, stream=True, timeout=30)
        lines = stream.iter_lines(decode_unicode=True)
        endpoint = next(line[6:] for line in lines if line.startswith("data: "))
        post = t.base + endpoint

        def send(body: dict) -> None:
            assert requests.post(post, json=body, headers=JSON, timeout=10).status_code == 202
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": SLOW})
        _wait_in_flight(lambda: _echo_in_flight(t))
        failed_at = time.monotonic()
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": SESSION_FAULT, "arguments": {}}})
        answers = {}
        for line in lines:  # ends when troupe closes the stream
            if line.startswith("data: "):
                message = json.loads(line[6:])
                answers[message.get("id")] = message
        assert time.monotonic() - failed_at < ANSWERED_WITHIN_S + 0.5
        assert "troupe" in _internal_error(answers[2])  # the call the failed Session held
        assert 3 not in answers or answers[3]["error"]["code"] == INTERNAL_ERROR
        assert requests.post(post, json={"jsonrpc": "2.0", "id": 4, "method": "ping"}, headers=JSON,
                             timeout=10).status_code == 404
    finally:
        assert t.stop() == 0


def _modern(t, rid, name: str, arguments: dict, out: list | None = None) -> dict:
    answer = requests.post(t.url, json={"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": name, "arguments": arguments, "_meta": META}},
        headers={**JSON, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name},
        timeout=30).json()
    if out is not None:
        out.append(answer)
    return answer


def test_modern_callers_share_a_session_but_not_each_others_faults(tmp_path):
    t = TroupeHttp(_config(tmp_path, json_response=True), module=FAILING)
    try:
        wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["servers"][0]["state"] == "ready", 30,
                   message="echo ready")
        other: list = []
        worker = threading.Thread(target=_modern, args=(t, "b", "echo__sleep", {"seconds": 1}, other))
        worker.start()
        _wait_in_flight(lambda: _echo_in_flight(t))
        assert "troupe internal error" in _internal_error(_modern(t, "a", HANDLER_FAULT, {}))
        worker.join(timeout=10)
        assert other[0]["result"]["content"][0]["text"] == "slept"  # the other caller's call went on
        # the shared Session itself fails: every call it holds is answered now, and a fresh one serves
        held: list = []
        worker = threading.Thread(target=_modern, args=(t, "c", "echo__sleep", {"seconds": 20}, held))
        worker.start()
        _wait_in_flight(lambda: _echo_in_flight(t))
        failed_at = time.monotonic()
        _internal_error(_modern(t, "d", SESSION_FAULT, {}))
        worker.join(timeout=5)
        assert not worker.is_alive() and time.monotonic() - failed_at < ANSWERED_WITHIN_S + 0.5
        assert "troupe" in _internal_error(held[0])
        assert _modern(t, "e", "echo__echo", {"text": "served on"})["result"]["content"][0]["text"] == "served on"
    finally:
        assert t.stop() == 0
