"""The official MCP Python SDK client drives troupe over stdio, in front of real servers."""
from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.support import peer_bin
from tests.support.troupe import server, stdio_params, write_config


def _everything() -> dict:
    return {"name": "everything", "transport": {"type": "stdio", "stdio": {
        "command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}}


def _troupe(config, *args):
    return stdio_params(config, *args)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_sdk_client_meta_mode_over_fastmcp_and_everything(tmp_path):
    config = write_config(tmp_path, [server("demo", "tests.servers.fastmcp_demo"), _everything()], mode="meta")

    async def scenario():
        async with Client(_troupe(config)) as client:  # auto mode: probes server/discover, speaks 2026-07-28
            assert client.server_info.name == "troupe"
            listed = {t.name for t in (await client.list_tools()).tools}
            assert {"list_tools", "call_tool", "filter_tools"} <= listed and len(listed) == 11
            page = json.loads((await client.call_tool("list_tools", {"limit": 500})).content[0].text)
            names = {t["name"] for t in page["tools"]}
            assert "demo__greet" in names and "everything__echo" in names and "core_status" in names
            # both backends at once
            greet, echo = await asyncio.gather(
                client.call_tool("call_tool", {"name": "demo__greet", "arguments": {"name": "Grace"}}),
                client.call_tool("call_tool", {"name": "everything__echo", "arguments": {"message": "hello"}}))
            assert "Grace" in greet.content[0].text
            assert "hello" in echo.content[0].text
            unknown = await client.call_tool("call_tool", {"name": "nope__nothing", "arguments": {}})
            assert unknown.is_error and "nope__nothing" in unknown.content[0].text
            resources = json.loads((await client.call_tool("list_resources", {"limit": 100})).content[0].text)
            assert any(r["uri"] == "demo://readme" for r in resources["resources"])
            readme = await client.call_tool("get_resource", {"uri": "demo://readme"})
            assert not readme.is_error
            prompts = json.loads((await client.call_tool("list_prompts", {})).content[0].text)
            assert any(p["name"] == "demo__summarize" for p in prompts["prompts"])
            got = await client.call_tool("get_prompt", {"name": "demo__summarize", "arguments": {"topic": "actors"}})
            assert "actors" in got.content[0].text
            status = json.loads((await client.call_tool("call_tool", {"name": "core_status"})).content[0].text)
            assert status["ready"] and {s["state"] for s in status["servers"]} == {"ready"}
    _run(scenario())


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_sdk_client_flat_mode(tmp_path):
    config = write_config(tmp_path, [server("demo", "tests.servers.fastmcp_demo"), _everything()], mode="flat")

    async def scenario():
        async with Client(_troupe(config), mode="legacy") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert "demo__multiply" in tools and "everything__echo" in tools and "core_status" in tools
            product = await client.call_tool("demo__multiply", {"a": 6, "b": 7})
            assert product.structured_content == {"result": 42.0}  # passed through untouched
            with pytest.raises(MCPError) as err:
                await client.call_tool("everything__no_such_tool", {})
            assert err.value.error.code == -32602
            wrong = await client.call_tool("demo__multiply", {"a": "six"})
            assert wrong.is_error
            res = await client.read_resource("demo://readme")
            assert res.contents
            prompt = await client.get_prompt("demo__summarize", {"topic": "gevent"})
            assert "gevent" in str(prompt.messages[0].content)
    _run(scenario())
