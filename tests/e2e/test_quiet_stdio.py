"""Over stdio troupe writes nothing to stderr at the default level: an MCP client shows each of
its server's stderr lines (Claude Code labels every one an error). A client that leaves, even
while the servers are still starting, is an INFO line at most: no warning, no error, no traceback."""
from __future__ import annotations

import pytest

from tests.support.troupe import Troupe, server, write_config

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
