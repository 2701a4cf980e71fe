"""troupe as a client of modern (2026-07-28) upstreams, used by a legacy client over stdio:
a modern-only server (stdio and HTTP), the Python SDK's own server, a legacy server that exits
on the probe, and the era remembered across a restart."""
from __future__ import annotations

import json

import pytest

from tests.support import PEERS, PYTHON, ROOT, wait_until
from tests.support.ports import start_announced, stop
from tests.support.schema import validate_message
from tests.support.troupe import server, text_of


def _tool_names(t) -> set[str]:
    return {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}


def test_modern_only_stdio_upstream_serves_a_legacy_client(make):
    t = make([server("modern", "tests.servers.modern_only", pin=False), server("echo", "tests.servers.echo")])
    wait_until(lambda: t.server_status("modern")["state"] == "ready", 15, message="modern ready")
    assert t.server_status("modern")["era"] == "modern" and t.server_status("echo")["era"] == "legacy"
    names = _tool_names(t)
    # every page was read (a page without resultType counts as complete)
    assert {"modern__echo", "modern__whoami", "modern__received", "modern__region"} <= names
    assert text_of(t.call("modern__echo", {"text": "hi"})) == "hi"
    meta = json.loads(text_of(t.call("modern__whoami")))
    assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {}  # troupe bridges nothing yet
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "troupe"
    # prompts and resources through the catalogue
    prompt = t.request("prompts/get", {"name": "modern__hello", "arguments": {"who": "you"}})["result"]
    assert prompt["messages"][0]["content"]["text"] == "Hello, you!"
    uris = [r["uri"] for r in t.request("resources/list")["result"]["resources"]]
    doc = next(u for u in uris if u.endswith("modern://doc") or "modern" in u and "doc" in u)
    assert t.request("resources/read", {"uri": doc})["result"]["contents"][0]["text"] == "modern doc"
    # no handshake, no ping, no setLevel reached the modern server
    received = json.loads(text_of(t.call("modern__received")))
    assert received[0] == "server/discover"
    assert not {"initialize", "notifications/initialized", "ping", "logging/setLevel"} & set(received)
    # a tools list change reaches troupe on the listen stream and it re-lists
    assert text_of(t.call("modern__add_tool")) == "added"
    wait_until(lambda: "modern__late" in _tool_names(t), 10, message="late tool listed")
    assert text_of(t.call("modern__late")) == "late"
    # what the legacy client got from a modern upstream is valid 2025-11-25 MCP
    methods = {m["id"]: m["method"] for m in t.sent if isinstance(m, dict) and "id" in m and "method" in m}
    for msg in t.received:
        validate_message(msg, "server", methods.get(msg.get("id")) if "method" not in msg else None)


def test_resources_without_list_changed_are_relisted_by_ttl(make):
    t = make([server("modern", "tests.servers.modern_only")])

    def listed() -> int:
        names = [r["name"] for r in t.request("resources/list")["result"]["resources"]]
        return max(int(n.split("-")[-1]) for n in names if "listed-" in n)

    first = listed()
    wait_until(lambda: listed() > first, 15, message="resources re-listed after ttlMs")


def test_subscription_goes_on_the_listen_stream(make):
    t = make([server("modern", "tests.servers.modern_only")])
    uris = [r["uri"] for r in t.request("resources/list")["result"]["resources"]]
    doc = next(u for u in uris if "doc" in u)
    assert "error" not in t.request("resources/subscribe", {"uri": doc})
    updated = []

    def got_update() -> bool:
        t.call("modern__touch", {"uri": "modern://doc"})
        while not t.notifications.empty():
            msg = t.notifications.get()
            if msg.get("method") == "notifications/resources/updated":
                updated.append(msg)
        return bool(updated)

    wait_until(got_update, 15, message="resources/updated relayed")
    assert updated[0]["params"]["uri"] == doc
    assert "resources/subscribe" not in json.loads(text_of(t.call("modern__received")))


def test_legacy_server_that_exits_on_the_probe_is_respawned_and_remembered(make):
    t = make([server("strict", "tests.servers.strict_legacy")], client_admin=True)
    wait_until(lambda: t.server_status("strict")["state"] == "ready", 20, message="strict ready")
    first_pid = text_of(t.call("strict__pid"))
    assert text_of(t.call("strict__echo", {"text": "legacy"})) == "legacy"
    assert t.server_status("strict")["restarts"] == 0  # respawned inside the opening, not a failure
    assert t.server_status("strict")["era"] == "legacy"
    # a restart remembers the era: straight to initialize, no probe, no second respawn
    assert not t.call("core_service_restart", {"name": "strict"})["result"].get("isError")
    wait_until(lambda: t.server_status("strict")["state"] == "ready"
               and text_of(t.call("strict__pid")) != first_pid, 20, message="restarted")
    assert text_of(t.call("strict__echo", {"text": "again"})) == "again"
    assert sum("exited on server/discover" in line for line in t.stderr) == 1


def test_modern_era_is_remembered_across_a_restart(make):
    t = make([server("modern", "tests.servers.modern_only")], client_admin=True)
    assert not t.call("core_service_restart", {"name": "modern"})["result"].get("isError")
    wait_until(lambda: t.server_status("modern")["restarts"] >= 1
               and t.server_status("modern")["state"] == "ready", 20, message="restarted")
    assert text_of(t.call("modern__echo", {"text": "back"})) == "back"


@pytest.fixture
def modern_http(tmp_path):
    proc, port = start_announced([PYTHON, "-m", "tests.servers.modern_only", "--http", "0", "--bad-header-tool"],
                                 tmp_path / "modern_http.log")
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


def test_modern_http_upstream_probe_headers_and_invalid_tools(make, modern_http):
    t = make([{"name": "mh", "transport": {"type": "streamable-http", "streamable_http": {"url": modern_http}}, "pin": False}])
    wait_until(lambda: t.server_status("mh")["state"] == "ready", 15, message="http modern ready")
    names = _tool_names(t)
    assert "mh__echo" in names and "mh__bad_header" not in names  # invalid x-mcp-header: dropped
    assert text_of(t.call("mh__echo", {"text": "over http"})) == "over http"  # Mcp-Name checked by the server
    assert text_of(t.call("mh__region", {"region": "eu-west"})) == "eu-west"  # Mcp-Param-Region sent
    prompt = t.request("prompts/get", {"name": "mh__hello", "arguments": {"who": "web"}})["result"]
    assert prompt["messages"][0]["content"]["text"] == "Hello, web!"
    assert text_of(t.call("mh__add_tool")) == "added"  # list_changed arrives on the listen SSE stream
    wait_until(lambda: "mh__late" in _tool_names(t), 10, message="late tool over http")


def test_http_outage_is_not_an_era(make, tmp_path):
    # nothing listens there: the probe fails as an outage, the server backs off, no era is guessed
    t = make([{"name": "gone", "transport": {"type": "streamable-http",
                                             "streamable_http": {"url": "http://127.0.0.1:9/mcp"}}},
              server("echo", "tests.servers.echo")])
    wait_until(lambda: t.server_status("gone")["state"] in ("backoff", "failed"), 15, message="outage")
    assert "server/discover failed" in (t.server_status("gone")["last_error"] or "")
    assert t.server_status("gone")["era"] is None


SDK_SERVER = """
from mcp.server.mcpserver import MCPServer
app = MCPServer("sdk-modern")

@app.tool()
def shout(text: str) -> str:
    \"\"\"Upper-case the text.\"\"\"
    return text.upper()

app.run()
"""


def test_python_sdk_server_as_a_modern_stdio_upstream(make, tmp_path):
    script = tmp_path / "sdk_server.py"
    script.write_text(SDK_SERVER)
    t = make([{"name": "sdk", "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": [str(script)], "work_dir": str(ROOT)}}}])
    wait_until(lambda: t.server_status("sdk")["state"] == "ready", 20, message="sdk ready")
    assert t.server_status("sdk")["era"] == "modern"
    assert text_of(t.call("sdk__shout", {"text": "modern"})) == "MODERN"


TS_SDK = PEERS / "node_modules" / "@modelcontextprotocol" / "server"


def test_typescript_sdk_modern_only_http_upstream(make, tmp_path):
    # .ci/run installs it into the peers directory; a missing peer is a failure, not a skip
    assert TS_SDK.exists(), f"TypeScript server SDK 2.x not installed at {TS_SDK}: run .ci/run"
    proc, port = start_announced(["node", str(ROOT / "tests" / "servers" / "ts_modern.cjs"), "0"],
                                 tmp_path / "ts_modern.log", env={"TROUPE_PEERS_DIR": str(PEERS)})
    try:
        t = make([{"name": "ts", "transport": {"type": "streamable-http", "streamable_http": {
            "url": f"http://127.0.0.1:{port}/mcp"}}}])
        wait_until(lambda: t.server_status("ts")["state"] == "ready", 15, message="ts ready")
        assert t.server_status("ts")["era"] == "modern"
        assert t.server_status("ts")["server_info"]["name"] == "ts-modern"
        assert text_of(t.call("ts__echo", {"text": "from a legacy client"})) == "from a legacy client"
        prompt = t.request("prompts/get", {"name": "ts__hello", "arguments": {"who": "ts"}})["result"]
        assert prompt["messages"][0]["content"]["text"] == "Hello, ts!"
    finally:
        stop(proc)
