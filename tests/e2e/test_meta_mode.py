"""Meta mode as designed: `tools/list` is exactly the eleven meta-tools, over stdio and HTTP, to
legacy and 2026-07-28 clients (the official SDK's client); troupe's own core_* tools are listed by
list_tools, filter_tools and list_core_tools (server "(troupe)") and run with call_tool; a core tool
a profile hides is unknown to call_tool too, in both eras."""
from __future__ import annotations

import asyncio
import json

import pytest
import requests
import yaml
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.troupe import Troupe, TroupeHttp, server, stdio_params, text_of, write_config

META_TOOLS = ["list_tools", "describe_tool", "filter_tools", "list_core_tools", "call_tool", "list_resources",
              "describe_resource", "get_resource", "list_prompts", "describe_prompt", "get_prompt"]
MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
ERAS = [("legacy", "2025-11-25"), ("auto", MODERN)]  # the SDK's modes, and the version each must settle on


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def _json(result) -> dict:
    assert not result.is_error, result
    return json.loads(result.content[0].text)


async def _meta_mode_as_designed(client: Client, version: str) -> None:
    """What every meta-mode client sees, whatever its front and era."""
    assert client.protocol_version == version
    assert [t.name for t in (await client.list_tools()).tools] == META_TOOLS
    status = _json(await client.call_tool("call_tool", {"name": "core_status"}))
    assert status["ready"] is True and status["mode"] == "meta"
    assert [s["name"] for s in status["servers"]] == ["echo"]

    every = {t["name"]: t["server"] for t in _json(await client.call_tool("list_tools", {"limit": 1000}))["tools"]}
    assert every["echo__echo"] == "echo" and every["core_status"] == "(troupe)"
    assert every["core_workflow_list"] == "(troupe)" and "core_service_stop" not in every  # an operator act
    core = _json(await client.call_tool("list_core_tools", {}))
    assert "core_status" in {t["name"] for t in core["tools"]} and core["total"] == len(core["tools"])
    found = _json(await client.call_tool("filter_tools", {"query": "status report of every server"}))
    assert found["tools"][0] == {"name": "core_status", "server": "(troupe)",
                                 "description": found["tools"][0]["description"]}
    described = _json(await client.call_tool("describe_tool", {"name": "core_events"}))
    assert described["server"] == "(troupe)" and described["example"]["name"] == "call_tool"

    events = _json(await client.call_tool("call_tool", {"name": "core_events", "arguments": {"limit": 5}}))
    assert len(events["events"]) <= 5
    bad = await client.call_tool("call_tool", {"name": "core_events", "arguments": {"limit": 0}})
    assert bad.is_error and "limit" in bad.content[0].text  # the core tool's own checks, as when called directly
    assert (await client.call_tool("call_tool", {"name": "echo__echo", "arguments": {"text": "hi"}})
            ).content[0].text == "hi"


@pytest.mark.parametrize("mode,version", ERAS)
def test_meta_mode_over_stdio(tmp_path, mode, version):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="meta")

    async def scenario():
        async with Client(stdio_params(config), mode=mode) as client:
            await _meta_mode_as_designed(client, version)
    _run(scenario())


@pytest.mark.parametrize("mode,version", ERAS)
def test_meta_mode_over_http(http_troupe, mode, version):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="meta")

    async def scenario():
        async with Client(t.url, mode=mode) as client:
            await _meta_mode_as_designed(client, version)
    _run(scenario())


def test_meta_mode_over_legacy_sse(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="meta")

    async def scenario():
        async with sse_client(t.base + "/sse") as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                assert [tool.name for tool in (await session.list_tools()).tools] == META_TOOLS
                status = _json(await session.call_tool("call_tool", {"name": "core_status"}))
                assert status["ready"] is True and [s["name"] for s in status["servers"]] == ["echo"]
                core = _json(await session.call_tool("list_core_tools", {}))
                assert "core_status" in {tool["name"] for tool in core["tools"]}
    _run(scenario())


TOKENS = {"hidden": "hidden-token-3b8e1f", "status": "status-token-9c2d47", "operator": "operator-token-6a0f55"}


def _profiles_config(tmp_path):
    """echo for everyone; `hidden`'s profile shows only echo (so no core tool), `status`'s names
    core_status in its allow list (and no other core tool)."""
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", pin=False)], mode="meta",
                          json_response=True, auth_token=TOKENS["operator"],
                          clients=[{"name": "hidden", "token": TOKENS["hidden"], "profile": "echo_only"},
                                   {"name": "status", "token": TOKENS["status"], "profile": "with_status"}])
    data = yaml.safe_load(config.read_text())
    data["profiles"] = {"echo_only": {"servers": ["echo"]},
                        "with_status": {"servers": ["echo"], "tools": {"allow": ["echo__*", "core_status"]}}}
    config.write_text(yaml.safe_dump(data))
    return config


def _refused(answer: dict, name: str) -> bool:
    """call_tool's answer for a tool this client cannot see: unknown, like a name no one has."""
    result = answer["result"]
    return result.get("isError") is True and f"unknown tool {name!r}" in text_of(answer)


def _modern_call(url: str, token: str, name: str, arguments: dict) -> dict:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": MODERN, "Authorization": f"Bearer {token}", "Mcp-Method": "tools/call",
               "Mcp-Name": "call_tool"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}, "_meta": ENVELOPE}}
    return requests.post(url, json=body, headers=headers, timeout=30).json()


@pytest.fixture
def profiled_http_troupe(tmp_path):
    """troupe over HTTP with the profiles of _profiles_config, its server ready."""
    started = []

    def make() -> TroupeHttp:
        t = TroupeHttp(_profiles_config(tmp_path))
        started.append(t)

        def status() -> dict:
            return requests.get(t.base + "/status", headers={"Authorization": f"Bearer {TOKENS['operator']}"},
                                timeout=10).json()
        wait_until(lambda: all(s["state"] == "ready" for s in status()["servers"]), 30, message="echo ready")
        return t
    yield make
    for t in started:
        assert t.stop() == 0


def test_a_core_tool_a_profile_hides_is_unknown_to_call_tool_over_http(profiled_http_troupe):
    t = profiled_http_troupe()
    hidden = McpHttp(t.url, {"Authorization": f"Bearer {TOKENS['hidden']}"})
    shown = McpHttp(t.url, {"Authorization": f"Bearer {TOKENS['status']}"})
    try:
        for client in (hidden, shown):
            assert [tool["name"] for tool in client.request("tools/list")["result"]["tools"]] == META_TOOLS
        assert _refused(hidden.call("call_tool", {"name": "core_status"}), "core_status")
        assert json.loads(text_of(hidden.call("list_core_tools")))["total"] == 0
        listed = json.loads(text_of(hidden.call("list_tools", {"limit": 1000})))["tools"]
        assert listed and not any(tool["server"] == "(troupe)" for tool in listed)
        assert hidden.call("describe_tool", {"name": "core_status"})["result"]["isError"] is True
        assert json.loads(text_of(hidden.call("filter_tools", {"server": "(troupe)"})))["total"] == 0
        assert hidden.call("core_status")["error"]["code"] == -32602  # nor by its name, directly

        assert json.loads(text_of(shown.call("call_tool", {"name": "core_status"})))["ready"] is True
        assert [tool["name"] for tool in json.loads(text_of(shown.call("list_core_tools")))["tools"]] == ["core_status"]
        assert _refused(shown.call("call_tool", {"name": "core_events", "arguments": {}}), "core_events")

        # the stateless era: the same rules for the same clients
        assert _refused(_modern_call(t.url, TOKENS["hidden"], "core_status", {}), "core_status")
        assert json.loads(text_of(_modern_call(t.url, TOKENS["status"], "core_status", {})))["ready"] is True
        assert _refused(_modern_call(t.url, TOKENS["status"], "core_events", {}), "core_events")
    finally:
        hidden.close()
        shown.close()


@pytest.mark.parametrize("mode,version", ERAS)
def test_a_core_tool_a_profile_hides_is_unknown_to_call_tool_over_stdio(tmp_path, mode, version):
    config = _profiles_config(tmp_path)

    async def scenario(profile: str, sees_status: bool):
        async with Client(stdio_params(config, "--profile", profile), mode=mode) as client:
            assert client.protocol_version == version
            assert [t.name for t in (await client.list_tools()).tools] == META_TOOLS
            answer = await client.call_tool("call_tool", {"name": "core_status"})
            if sees_status:
                assert json.loads(answer.content[0].text)["ready"] is True
            else:
                assert answer.is_error and "unknown tool 'core_status'" in answer.content[0].text
            events = await client.call_tool("call_tool", {"name": "core_events"})
            assert events.is_error and "unknown tool 'core_events'" in events.content[0].text
            core = _json(await client.call_tool("list_core_tools", {}))
            assert [t["name"] for t in core["tools"]] == (["core_status"] if sees_status else [])
    _run(scenario("echo_only", False))
    _run(scenario("with_status", True))


def test_flat_mode_still_lists_core_tools(tmp_path):
    t = Troupe(write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat"))
    try:
        t.initialize()
        names = [tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]]
        assert "echo__echo" in names and "core_status" in names and not set(META_TOOLS) & set(names)
        assert json.loads(text_of(t.call("core_status")))["mode"] == "flat"
    finally:
        t.close()
