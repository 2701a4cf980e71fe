"""MCP 2026-07-28 over troupe's stdio front: the official SDK client negotiates the stateless revision,
and each malformed modern request gets the revision's error."""
from __future__ import annotations

import asyncio

import pytest
from mcp import Client

from tests.support import peer_bin
from tests.support.troupe import Troupe, server, stdio_params, write_config

MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def _config(tmp_path):
    return write_config(tmp_path, [server("demo", "tests.servers.fastmcp_demo"), server("echo", "tests.servers.echo")],
                        mode="flat")


@pytest.mark.slow  # starts troupe three times with the SDK
@pytest.mark.parametrize("mode,expected", [("auto", MODERN), (MODERN, MODERN), ("legacy", "2025-11-25")])
def test_the_sdk_client_in_each_mode_uses_tools_resources_and_prompts(tmp_path, mode, expected):
    params = stdio_params(_config(tmp_path))

    async def scenario():
        async with Client(params, mode=mode) as client:
            assert client.protocol_version == expected
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"echo__echo", "demo__greet"} <= names
            assert (await client.call_tool("echo__echo", {"text": "stateless"})).content[0].text == "stateless"
            assert [r.uri for r in (await client.list_resources()).resources] == ["demo://readme"]
            assert (await client.read_resource("demo://readme")).contents
            got = await client.get_prompt("demo__summarize", {"topic": "eras"})
            assert "eras" in got.messages[0].content.text
    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_modern_requests_are_answered_statelessly_with_the_revisions_errors(tmp_path):
    t = Troupe(_config(tmp_path))
    try:
        # no initialize: a modern request stands alone
        discovered = t.request("server/discover", {"_meta": ENVELOPE}, timeout=30)["result"]
        assert discovered["supportedVersions"][0] == MODERN and "2025-11-25" in discovered["supportedVersions"]
        listed = t.request("tools/list", {"_meta": ENVELOPE}, timeout=30)["result"]
        assert listed["resultType"] == "complete" and listed["cacheScope"] == "public"
        assert any(tool["name"] == "echo__echo" for tool in listed["tools"])
        called = t.request("tools/call", {"name": "echo__echo", "arguments": {"text": "hi"}, "_meta": ENVELOPE})
        assert called["result"]["content"][0]["text"] == "hi" and called["result"]["resultType"] == "complete"
        wrong = t.request("tools/list", {"_meta": {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2030-01-01"}})
        assert wrong["error"]["code"] == -32022 and wrong["error"]["data"]["supported"] == [MODERN]
        bare = t.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})
        assert bare["error"]["code"] == -32602
        assert t.request("ping", {"_meta": ENVELOPE})["error"]["code"] == -32601
        assert t.request("logging/setLevel", {"level": "info", "_meta": ENVELOPE})["error"]["code"] == -32601
        # the same process still serves a legacy client: the handshake path is untouched
        assert t.initialize()["result"]["protocolVersion"] == "2025-11-25"
        assert t.request("ping")["result"] == {}
    finally:
        t.close()


def test_the_sdk_client_in_auto_mode_negotiates_2026_07_28_and_uses_every_feature_with_a_listen_stream(tmp_path):
    """One troupe, one SDK client in its default (auto) mode: tools, resources, prompts, completion,
    and a subscriptions/listen stream carrying a list change and a resource update."""
    from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged
    from mcp.types import PromptReference

    config = write_config(tmp_path, [server("demo", "tests.servers.fastmcp_demo"),
                                     server("modern", "tests.servers.modern_only", pin=False),
                                     server("echo", "tests.servers.echo", pin=False),
                                     {"name": "everything", "transport": {"type": "stdio", "stdio": {
                                         "command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}}],
                          mode="flat")
    params = stdio_params(config)

    async def scenario():
        async with Client(params) as client:
            assert client.protocol_version == MODERN and client.server_info.name == "troupe"
            names = [t.name for t in (await client.list_tools()).tools]
            assert {"echo__echo", "demo__greet", "modern__touch"} <= set(names)
            assert names[:names.index("core_status")] == sorted(names[:names.index("core_status")])
            assert "Grace" in (await client.call_tool("demo__greet", {"name": "Grace"})).content[0].text
            uris = {str(r.uri) for r in (await client.list_resources()).resources}
            assert {"demo://readme", "modern://doc"} <= uris
            assert (await client.read_resource("modern://doc")).contents[0].text == "modern doc"
            assert "eras" in (await client.get_prompt("demo__summarize", {"topic": "eras"})).messages[0].content.text
            completed = await client.complete(PromptReference(type="ref/prompt", name="everything__completable-prompt"),
                                              {"name": "department", "value": "Eng"})
            assert completed.completion.values == ["Engineering"]
            async with client.listen(tools_list_changed=True, resource_subscriptions=["modern://doc"]) as sub:
                assert sub.honored.tools_list_changed and sub.honored.resource_subscriptions == ["modern://doc"]
                await client.call_tool("modern__touch", {"uri": "modern://doc"})
                await client.call_tool("echo__notify_change", {})
                # both arrive, in either order, possibly after an unrelated list change (a server
                # that finished starting late); each wait is bounded
                seen: list = []
                while ResourceUpdated(uri="modern://doc") not in seen or \
                        not any(isinstance(e, ToolsListChanged) for e in seen):
                    seen.append(await asyncio.wait_for(sub.__anext__(), 20))
            assert "echo__late_tool" in {t.name for t in (await client.list_tools()).tools}
    asyncio.run(asyncio.wait_for(scenario(), 90))


def test_the_sdk_client_in_legacy_mode_still_gets_a_session(tmp_path):
    params = stdio_params(_config(tmp_path))

    async def scenario():
        async with Client(params, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            assert (await client.call_tool("echo__echo", {"text": "old"})).content[0].text == "old"
            assert (await client.read_resource("demo://readme")).contents
    asyncio.run(asyncio.wait_for(scenario(), 90))
