"""troupe over stdio as a real process: meta and flat modes, errors, crashes, shutdown."""
from __future__ import annotations

import os
import signal
import time

import pytest

from tests.support import PYTHON, ROOT, wait_until
from tests.support.schema import validate_message
from tests.support.troupe import Troupe, children_of, json_of, pid_alive, server, text_of, write_config


@pytest.fixture
def troupe_factory(tmp_path):
    started: list[Troupe] = []

    def make(servers, *args, **serve) -> Troupe:
        t = Troupe(write_config(tmp_path, servers, **serve), *args)
        started.append(t)
        return t

    yield make
    for t in started:
        t.close()


def _validate_all(t: Troupe) -> None:
    """Every message troupe wrote is valid MCP (2025-11-25), typed by the request it answers."""
    methods = {m["id"]: m["method"] for m in t.sent if isinstance(m, dict) and "id" in m and "method" in m}
    assert t.received, "troupe wrote nothing"
    for msg in t.received:
        method = methods.get(msg.get("id")) if "method" not in msg else None
        # server/discover exists only in 2026-07-28: its answer is checked against that revision
        validate_message(msg, "server", method, **({"version": "2026-07-28"} if method == "server/discover" else {}))


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_meta_mode_lists_and_calls_two_backends(troupe_factory):
    t = troupe_factory([server("echo", "tests.servers.echo"),
                        server("demo", "tests.servers.fastmcp_demo")], mode="meta")
    init = t.initialize()["result"]
    assert init["serverInfo"]["name"] == "troupe"
    names = {tool["name"] for tool in t.request("tools/list")["result"]["tools"]}
    # meta mode shows the meta-tools only: servers' tools and troupe's own are reached through them
    assert names == {"list_tools", "describe_tool", "filter_tools", "list_core_tools", "call_tool", "list_resources",
                     "describe_resource", "get_resource", "list_prompts", "describe_prompt", "get_prompt"}

    page = json_of(t.call("list_tools", {"limit": 3, "offset": 0}))
    assert page["limit"] == 3 and page["offset"] == 0 and len(page["tools"]) == 3
    assert page["total"] >= 8 and page["truncated"] is True
    everything = json_of(t.call("list_tools", {"limit": 1000}))
    qualified = {tool["name"] for tool in everything["tools"]}
    assert {"echo__echo", "echo__add", "demo__greet", "demo__multiply"} <= qualified
    assert {"core_status", "core_mcpserver_list", "core_mcpserver_get"} <= qualified
    assert everything["truncated"] is False

    found = json_of(t.call("filter_tools", {"query": "multiply numbers"}))
    assert found["tools"][0]["name"] == "demo__multiply"
    described = json_of(t.call("describe_tool", {"name": "echo__add"}))
    assert described["tool"]["inputSchema"]["required"] == ["a", "b"]
    assert described["example"]["arguments"]["name"] == "echo__add"

    # two backends at once: both requests are in flight before either answer is read
    r1 = t.send_request("tools/call", {"name": "call_tool", "arguments": {"name": "echo__add", "arguments": {"a": 2, "b": 3}}})
    r2 = t.send_request("tools/call", {"name": "call_tool", "arguments": {"name": "demo__greet", "arguments": {"name": "Ada"}}})
    add, greet = t.wait_response(r1)["result"], t.wait_response(r2)["result"]
    assert add["structuredContent"] == {"sum": 5}  # the backend's result, unchanged
    assert "Ada" in greet["content"][0]["text"]

    status = t.status()
    assert status["ready"] is True and status["uptime_s"] > 0
    by_name = {s["name"]: s for s in status["servers"]}
    assert by_name["echo"]["state"] == "ready" and by_name["echo"]["tools"] >= 5
    assert by_name["demo"]["resources"] >= 1 and by_name["demo"]["prompts"] >= 1
    assert isinstance(by_name["echo"]["pid"], int)
    _validate_all(t)


def test_flat_mode_collisions_and_clear_errors(troupe_factory):
    t = troupe_factory([server("one", "tests.servers.echo", prefix=""),
                        server("two", "tests.servers.echo", "--name", "two", prefix="")], mode="flat")
    t.initialize()
    tools = {tool["name"] for tool in t.request("tools/list")["result"]["tools"]}
    assert "echo" in tools
    renamed = [n for n in tools if n.startswith("echo_") and n != "echo"]
    assert len(renamed) == 1, tools  # the collision is resolved, deterministically
    assert "core_status" in tools
    assert text_of(t.call("echo", {"text": "hi"})) == "hi"
    assert text_of(t.call(renamed[0], {"text": "there"})) == "there"

    unknown = t.call("no_such_tool")
    assert unknown["error"]["code"] == -32602 and "no_such_tool" in unknown["error"]["message"]
    wrong = t.call("add", {"a": "x"})["result"]
    assert wrong["isError"] is True
    bad_args = t.request("tools/call", {"name": "echo", "arguments": [1, 2]})
    assert bad_args["error"]["code"] == -32602
    assert t.request("no/such/method")["error"]["code"] == -32601
    # a legacy session may still ask which versions troupe speaks (2026-07-28 first)
    assert t.request("server/discover")["result"]["supportedVersions"][0] == "2026-07-28"
    t.send(b"{not json")
    wait_until(lambda: any(m.get("error", {}).get("code") == -32700 for m in t.received), 5, message="parse error")
    assert text_of(t.call("echo", {"text": "still here"})) == "still here"
    _validate_all(t)


def test_killed_backend_fails_in_flight_call_fast_and_comes_back(troupe_factory):
    t = troupe_factory([server("echo", "tests.servers.echo"),
                        server("other", "tests.servers.echo", "--name", "other")], mode="flat")
    t.initialize()
    t.request("tools/list")
    pid = int(text_of(t.call("echo__pid")))
    rid = t.send_request("tools/call", {"name": "echo__sleep", "arguments": {"seconds": 60}})
    wait_until(lambda: t.server_status("echo")["in_flight"] == 1, 10, message="call in flight")
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    answer = t.wait_response(rid, timeout=10)["result"]
    assert time.monotonic() - started < 5
    assert answer["isError"] is True and "echo" in answer["content"][0]["text"]
    # the other server never noticed
    assert text_of(t.call("other__echo", {"text": "fine"})) == "fine"
    # a call while it is down fails at once, naming it and its state
    down = t.call("echo__echo", {"text": "x"})["result"]
    if down.get("isError"):
        assert "echo" in down["content"][0]["text"]
    wait_until(lambda: t.server_status("echo")["state"] == "ready", 15, message="echo restarted")
    assert t.server_status("echo")["restarts"] >= 1
    assert int(text_of(t.call("echo__pid"))) != pid
    _validate_all(t)


def test_stdin_eof_shuts_down_and_leaves_no_children(troupe_factory):
    t = troupe_factory([server("echo", "tests.servers.echo"),
                        server("stubborn", "tests.servers.ignore_sigterm")], mode="flat")
    t.initialize()
    t.request("tools/list")
    grandchild = int(text_of(t.call("stubborn__grandchild_pid")))
    kids = children_of(t.proc.pid)
    assert len(kids) >= 3
    started = time.monotonic()
    assert t.close(timeout=10) == 0
    assert time.monotonic() - started < 6  # shutdown finishes within 5 s (+ process exit)
    wait_until(lambda: not any(pid_alive(k) for k in kids + [grandchild]), 5, message="children gone")


def test_sigterm_shuts_down_cleanly(troupe_factory):
    t = troupe_factory([server("echo", "tests.servers.echo")], mode="flat")
    t.initialize()
    t.request("tools/list")
    kids = children_of(t.proc.pid)
    t.proc.send_signal(signal.SIGTERM)
    assert t.proc.wait(timeout=8) == 0
    wait_until(lambda: not any(pid_alive(k) for k in kids), 5, message="children gone")


def test_broken_config_names_file_key_and_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("servers:\n  - name: ok\n    transport:\n      type: stdio\n      stdio: {command: x}\n"
                   "  - name: broken\n    timeout: soon\n    transport: {type: carrier-pigeon}\n")
    import subprocess
    proc = subprocess.run([PYTHON, "-m", "actors.main", "--config", str(bad)], cwd=ROOT, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2
    assert f"{bad}:7: servers[1].timeout" in proc.stderr
    assert f"{bad}:8: servers[1].transport.type" in proc.stderr and "carrier-pigeon" in proc.stderr


def test_claude_style_json_config(tmp_path):
    cfg = tmp_path / "claude.json"
    import orjson
    cfg.write_text(orjson.dumps({"mcpServers": {"echo": {"command": PYTHON, "args": ["-m", "tests.servers.echo"],
                                                          "cwd": str(ROOT), "env": {"SECRET_TOKEN": "hunter2"}}}}).decode())
    t = Troupe(cfg, "--mode", "flat")
    try:
        t.initialize()
        assert text_of(t.call("echo__echo", {"text": "json"})) == "json"
        assert "hunter2" not in str(t.status())  # env values are never shown
    finally:
        t.close()
    assert not any("hunter2" in line for line in t.stderr)


def test_single_unprefixed_server_answers_for_names_it_does_not_list(troupe_factory):
    t = troupe_factory([server("solo", "tests.servers.echo", prefix="")], mode="flat")
    t.initialize()
    t.request("tools/list")
    # troupe is a transparent front for one unprefixed server: the backend itself answers
    unknown = t.call("not_listed_here")
    assert unknown["error"]["code"] == -32602 and "not_listed_here" in unknown["error"]["message"]
    assert text_of(t.call("echo", {"text": "direct"})) == "direct"
