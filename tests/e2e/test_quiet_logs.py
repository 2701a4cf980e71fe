"""Over stdio troupe writes nothing to stderr at the default level: an MCP client shows each of
its server's stderr lines (Claude Code labels every one an error). A client that leaves (stdin
closed, even while the servers are still starting; an HTTP client hanging up, an SSE stream
closed) is an INFO line at most: no warning, no error, no traceback."""
from __future__ import annotations

import pytest
import requests

from tests.e2e.test_modern_http import _raw_post
from tests.support import wait_until
from tests.support.troupe import Troupe, TroupeHttp, server, write_config

JSON = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
HELLO = {"protocolVersion": "2025-11-25", "capabilities": {},
         "clientInfo": {"name": "troupe-tests", "version": "1"}}
# A modern client's first word: its era probe, capabilities in _meta.
PROBE = {"jsonrpc": "2.0", "id": 0, "method": "server/discover",
         "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}}}}


def _servers() -> list[dict]:
    # slow reads nothing for 30 s: its opening probe is still out when the client leaves
    return [server("echo", "tests.servers.echo"), server("slow", "tests.servers.slow_start", "--delay", "30"),
            server("own", "tests.servers.echo", share="per_client"), server("modern", "tests.servers.modern_only")]


def _drained(t: Troupe) -> list[str]:
    code = t.close(timeout=20)
    # The reader thread ends at the pipe's EOF, which came with the exit: wait for it to finish.
    t.stderr_reader.join(timeout=10)
    assert not t.stderr_reader.is_alive(), "troupe's stderr still open after it exited"
    assert code == 0, "".join(t.stderr)
    return list(t.stderr)


def test_a_clean_start_list_and_exit_writes_nothing_to_stderr(tmp_path):
    t = Troupe(write_config(tmp_path, [server("echo", "tests.servers.echo"),
                                       server("own", "tests.servers.echo", share="per_client")], mode="flat"))
    t.initialize()
    tools = t.request("tools/list", timeout=30)["result"]["tools"]
    assert {"echo__echo", "own__echo"} <= {tool["name"] for tool in tools}
    assert t.call("own__echo", {"text": "hi"})["result"]["content"][0]["text"] == "hi"
    assert _drained(t) == []


@pytest.mark.parametrize("first", ["initialize", "server/discover", "nothing"])
def test_a_client_leaving_during_start_writes_nothing_to_stderr(tmp_path, first):
    t = Troupe(write_config(tmp_path, _servers(), mode="flat"))
    if first == "initialize":
        t.send_request("initialize", HELLO)
        t.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        t.send_request("tools/list")  # waits for start-up: the client goes before its answer
    elif first == "server/discover":
        t.send(PROBE)
    assert _drained(t) == []


def test_at_info_the_start_and_the_departure_are_logged_and_nothing_worse(tmp_path):
    t = Troupe(write_config(tmp_path, _servers(), mode="flat"), "--log-level", "info")
    t.send_request("initialize", HELLO)
    t.send_request("tools/list")
    lines = _drained(t)
    text = "".join(lines)
    assert "serving over stdio" in text and "slow stopped → starting" in text, text
    assert sum("client gone" in line for line in lines) == 1, text
    assert not [line for line in lines if " INFO " not in line], text  # no warning, error or traceback


def _worse_than_info(lines: list[str]) -> list[str]:
    """Lines of troupe's log above INFO, and any traceback (a level is the second word of a line)."""
    return [line for line in lines if "Traceback" in line
            or (len(line.split()) > 1 and line.split()[1] in ("WARNING", "ERROR", "CRITICAL"))]


def _in_flight(t, name: str = "echo") -> int:
    return requests.get(f"{t.base}/status/servers/{name}", timeout=5).json()["in_flight"]


def test_http_clients_hanging_up_log_no_warning_nor_error(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat"), "--log-level", "debug")
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sleep = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                 "params": {"name": "echo__sleep", "arguments": {"seconds": 60}}}
        # A Streamable HTTP session: its GET stream closed, a call's SSE answer hung up on, then DELETE.
        opened = requests.post(t.url, json=hello, headers=JSON, timeout=20)
        session = {**JSON, "Mcp-Session-Id": opened.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
        requests.post(t.url, json=initialized, headers=session, timeout=10)
        with requests.get(t.url, headers={**session, "Accept": "text/event-stream"}, stream=True, timeout=10) as stream:
            assert stream.status_code == 200
        sock = _raw_post(t.url, sleep, session)  # a raw socket: the test hangs up when it likes
        wait_until(lambda: _in_flight(t) == 1, 20, message="the session's call in flight")
        sock.close()
        wait_until(lambda: _in_flight(t) == 0, 10, message="the hung-up call ended")
        assert requests.delete(t.url, headers=session, timeout=10).status_code in (200, 204)
        # A legacy SSE client: its stream closed with a call in flight.
        with requests.get(t.base + "/sse", headers={"Accept": "text/event-stream"}, stream=True, timeout=10) as sse:
            lines = sse.iter_lines()
            endpoint = next(line for line in lines if line.startswith(b"data: "))[len(b"data: "):].decode()
            for message in (hello, initialized, sleep):
                assert requests.post(t.base + endpoint, json=message, timeout=10).status_code == 202
            wait_until(lambda: _in_flight(t) == 1, 20, message="the SSE client's call in flight")
        wait_until(lambda: _in_flight(t) == 0, 10, message="the SSE client's call ended")
        # The operator's event stream, closed.
        with requests.get(t.base + "/events", stream=True, timeout=10) as events:
            assert events.status_code == 200
    finally:
        assert t.stop() == 0
    assert _worse_than_info(t.stderr) == [], "".join(t.stderr[-60:])
