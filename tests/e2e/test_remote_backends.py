"""troupe consuming remote servers (Streamable HTTP, legacy SSE, FastMCP over HTTP), and the
MCP Inspector CLI, a non-Python client, listing and calling tools through troupe."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support import PYTHON, ROOT, peer_bin
from tests.support.ports import start_announced, start_with_port_retry, stop
from tests.support.troupe import Troupe, TroupeHttp, server, text_of, write_config


@pytest.fixture
def remote_peers(tmp_path):
    """server-everything over streamableHttp and over sse, and a FastMCP server over HTTP."""
    procs, ports = [], {}
    try:
        for name, mode in (("streamable", "streamableHttp"), ("sse", "sse")):
            # server-everything takes a fixed PORT: started again on another port if that one was taken.
            argv = [peer_bin("mcp-server-everything"), mode]
            proc, ports[name] = start_with_port_retry(lambda port, argv=argv: (argv, {"PORT": str(port)}),
                                                      tmp_path / f"everything-{name}.log")
            procs.append(proc)
        proc, ports["fastmcp"] = start_announced([PYTHON, "-m", "tests.servers.fastmcp_demo", "--http", "0"],
                                                 tmp_path / "fastmcp_demo.log")
        procs.append(proc)
        yield ports
    finally:
        for proc in procs:
            stop(proc)


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_troupe_aggregates_remote_servers(tmp_path, remote_peers):
    servers = [
        {"name": "ev_http", "transport": {"type": "streamable-http",
                                          "streamable_http": {"url": f"http://127.0.0.1:{remote_peers['streamable']}/mcp"}}},
        {"name": "ev_sse", "transport": {"type": "sse", "sse": {"url": f"http://127.0.0.1:{remote_peers['sse']}/sse"}}},
        {"name": "demo", "transport": {"type": "streamable-http",
                                       "streamable_http": {"url": f"http://127.0.0.1:{remote_peers['fastmcp']}/mcp"}}},
    ]
    t = Troupe(write_config(tmp_path, servers, mode="flat"))
    try:
        t.initialize()
        names = {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
        assert {"ev_http__echo", "ev_sse__echo", "demo__greet"} <= names
        assert "hi" in text_of(t.call("ev_http__echo", {"message": "hi"}))
        assert "there" in text_of(t.call("ev_sse__echo", {"message": "there"}))
        assert "Lin" in text_of(t.call("demo__greet", {"name": "Lin"}))
        status = {s["name"]: s for s in t.status()["servers"]}
        assert status["ev_http"]["url"].endswith("/mcp") and status["ev_sse"]["transport"] == "sse"
        assert all(s["state"] == "ready" for s in status.values())
        readme = t.request("resources/read", {"uri": "demo://readme"})
        assert readme["result"]["contents"]
    finally:
        t.close()


def _inspector(*args: str) -> dict:
    proc = subprocess.run([peer_bin("mcp-inspector"), "--cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_inspector_cli_over_stdio_http_and_sse(tmp_path):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat")
    # The Inspector hands a server it launches only a few variables: this test's config directory
    # (approvals and pins, see tests/conftest.py) goes to troupe explicitly.
    own = ("-e", f"TROUPE_CONFIG_DIR={os.environ['TROUPE_CONFIG_DIR']}", "--", PYTHON, "-m", "actors.main",
           "--config", str(config))
    listed = _inspector(*own, "--method", "tools/list")
    assert "echo__echo" in {t["name"] for t in listed["tools"]}
    called = _inspector(*own, "--method", "tools/call", "--tool-name", "echo__add", "--tool-arg", "a=2", "b=5")
    assert called["structuredContent"] == {"sum": 7}
    t = TroupeHttp(config)
    try:
        over_http = _inspector(t.url, "--transport", "http", "--method", "tools/call", "--tool-name", "echo__echo",
                               "--tool-arg", "text=inspected")
        assert over_http["content"][0]["text"] == "inspected"
        over_sse = _inspector(t.base + "/sse", "--transport", "sse", "--method", "tools/list")
        assert "echo__pid" in {tool["name"] for tool in over_sse["tools"]}
    finally:
        t.stop()
