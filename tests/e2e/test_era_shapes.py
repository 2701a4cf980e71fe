"""Each client gets its own era's shapes through troupe, whatever era the upstream speaks: a
handshake-era client sees no 2026-07-28 field from the official SDK's modern server (on the wire,
and through the SDK's own client) nor a shape only 2026-07-28 allows (an array as outputSchema
and structuredContent), and a 2026-07-28 client no 2025-11-25-only field from server-everything
(a legacy server that lists every tool with `execution`) but every shape its era allows."""
from __future__ import annotations

import asyncio

from mcp import Client

from tests.support import peer_bin
from tests.support.schema import validate_message
from tests.support.troupe import server, stdio_params, write_config

MODERN_FIELDS = {"resultType", "ttlMs", "cacheScope"}
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_a_legacy_client_gets_no_modern_field_on_the_wire_from_a_modern_upstream(make):
    t = make([server("m", "tests.servers.sdk_modern"), server("mo", "tests.servers.modern_only")])
    assert t.server_status("m")["era"] == "modern"
    answers = {
        "tools/list": t.request("tools/list"),
        "tools/call": t.call("m__shout", {"text": "quiet"}),
        "tools/call numbers": t.call("mo__numbers", {"n": 3}),
        "resources/list": t.request("resources/list"),
        "resources/templates/list": t.request("resources/templates/list"),
        "resources/read": t.request("resources/read", {"uri": "notes://readme"}),
        "prompts/list": t.request("prompts/list"),
        "prompts/get": t.request("prompts/get", {"name": "m__greet", "arguments": {"who": "you"}}),
        "completion/complete": t.request("completion/complete", {
            "ref": {"type": "ref/prompt", "name": "m__greet"}, "argument": {"name": "who", "value": "w"}}),
    }
    for method, answer in answers.items():
        result = answer["result"]  # each one answered, not refused
        assert not MODERN_FIELDS & result.keys(), (method, result)
        assert SERVER_INFO not in (result.get("_meta") or {}), (method, result)
        validate_message(answer, "server", method.split()[0])  # 2025-11-25's schema, the one it negotiated
    # nothing else troupe wrote to this client (notifications included) carries a modern-only _meta key
    for msg in t.received:
        body = msg.get("result") if "result" in msg else msg.get("params")
        meta = body.get("_meta") if isinstance(body, dict) else None
        assert not {SERVER_INFO, SUBSCRIPTION} & set(meta or ()), msg
    # the upstream's answers themselves, not empty ones
    assert answers["tools/call"]["result"]["content"][0]["text"] == "QUIET"
    # an array is no structuredContent in 2025-11-25: the client reads it as text, with no outputSchema to match
    numbers = next(tool for tool in answers["tools/list"]["result"]["tools"] if tool["name"] == "mo__numbers")
    assert "outputSchema" not in numbers and numbers["inputSchema"]["properties"]["n"] == {"type": "integer"}
    assert answers["tools/call numbers"]["result"] == {"content": [{"type": "text", "text": "[1,2,3]"}]}
    assert answers["resources/read"]["result"]["contents"][0]["text"] == "read me"
    assert answers["prompts/get"]["result"]["messages"][0]["content"]["text"] == "Hello, you!"
    assert answers["completion/complete"]["result"]["completion"]["values"] == ["world", "wide"]
    assert [tpl["uriTemplate"] for tpl in answers["resources/templates/list"]["result"]["resourceTemplates"]] \
        == ["notes://{name}"]


def test_a_legacy_sdk_client_sees_no_modern_stamp_from_a_modern_upstream(tmp_path):
    # The SDK drops a later revision's top-level fields by itself (the wire test above checks those);
    # what reaches its models is _meta, where a modern upstream's serverInfo stamp must not be.
    config = write_config(tmp_path, [server("m", "tests.servers.sdk_modern"), server("mo", "tests.servers.modern_only")],
                          mode="flat")

    async def scenario():
        async with Client(stdio_params(config), mode="legacy") as client:
            # the SDK checks a listing against 2025-11-25: one tool's array outputSchema would fail it whole
            listed = {t.name: t for t in (await client.list_tools()).tools}
            assert {"m__shout", "mo__numbers"} <= listed.keys() and listed["mo__numbers"].output_schema is None
            numbers = await client.call_tool("mo__numbers", {"n": 2})
            assert numbers.structured_content is None and numbers.content[0].text == "[1,2]"
            called = await client.call_tool("m__shout", {"text": "quiet"})
            assert called.content[0].text == "QUIET" and not called.is_error
            read = await client.read_resource("notes://readme")
            assert read.contents[0].text == "read me"
            got = await client.get_prompt("m__greet", {"who": "you"})
            assert "Hello, you!" in got.messages[0].content.text
            for result in (called, read, got):
                assert SERVER_INFO not in (result.meta or {}), (type(result).__name__, result.meta)
    _run(scenario())


def test_a_modern_client_sees_no_legacy_field_from_a_legacy_upstream_and_troupe_s_server_info(tmp_path):
    everything = {"name": "everything", "transport": {"type": "stdio", "stdio": {
        "command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}, "pin": False}
    config = write_config(tmp_path, [everything, server("m", "tests.servers.sdk_modern"),
                                     server("mo", "tests.servers.modern_only")], mode="flat")

    async def scenario():
        async with Client(stdio_params(config)) as client:  # auto: troupe answers server/discover, 2026-07-28
            assert client.server_info.name == "troupe"
            tools = await client.list_tools()
            names = {t.name for t in tools.tools}
            assert "everything__echo" in names and "m__shout" in names
            # server-everything lists `execution` (taskSupport), which 2026-07-28 moved to the tasks extension
            assert all("execution" not in t.model_fields_set for t in tools.tools), \
                [t.name for t in tools.tools if "execution" in t.model_fields_set]
            assert tools.meta[SERVER_INFO]["name"] == "troupe"
            # an upstream's own stamp gives way to troupe's: the server this client talks to
            called = await client.call_tool("m__shout", {"text": "loud"})
            assert called.content[0].text == "LOUD" and called.meta[SERVER_INFO]["name"] == "troupe"
            # what only 2026-07-28 allows reaches a 2026-07-28 client whole
            numbers = next(t for t in tools.tools if t.name == "mo__numbers")
            assert numbers.output_schema == {"type": "array", "items": {"type": "integer"}}
            assert (await client.call_tool("mo__numbers", {"n": 2})).structured_content == [1, 2]
            echoed = await client.call_tool("everything__echo", {"message": "hi"})
            assert "hi" in echoed.content[0].text and echoed.meta[SERVER_INFO]["name"] == "troupe"
    _run(scenario())
