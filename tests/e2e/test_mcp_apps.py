"""MCP Apps through troupe: two FastMCP servers with an app tool and the same `ui://` view (one on
stdio speaking 2026-07-28, one over HTTP in the session era), reached by the SDK's client over
troupe's stdio and HTTP fronts, in flat and meta mode. Each tool's view is read through the URI
troupe rewrote it to, and is its own server's; the client's apps capability reaches the servers."""
from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client
from mcp.client.extension import advertise

from tests.support import PYTHON
from tests.support.ports import start_announced, stop
from tests.support.troupe import Troupe, TroupeHttp, server, stdio_params, write_config

UI = "io.modelcontextprotocol/ui"
UI_MIME = "text/html;profile=mcp-app"
VIEW = "ui://board/view.html"
CSP = {"connectDomains": ["https://api.example.com"]}
# What the apps host declares; `features` shows that its own settings, not troupe's, went upstream.
HOST_UI = {"mimeTypes": [UI_MIME], "features": ["streaming"]}


@pytest.fixture
def apps_servers(tmp_path):
    """troupe config entries: `alpha` (stdio, label A) and `beta` (HTTP, session era, label B),
    both serving their view at the same ui:// URI."""
    proc, port = start_announced([PYTHON, "-m", "tests.servers.fastmcp_app", "--label", "B", "--http", "0",
                                  "--legacy"], tmp_path / "beta.log")
    try:
        yield [server("alpha", "tests.servers.fastmcp_app", "--label", "A"),
               {"name": "beta", "transport": {"type": "streamable-http", "streamable_http": {"url": f"http://127.0.0.1:{port}/mcp"}}}]
    finally:
        stop(proc)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def _host(target, mode):
    return Client(target, mode=mode, extensions=[advertise(UI, HOST_UI)])


async def _read_view(client, uri: str) -> dict:
    contents = (await client.read_resource(uri)).contents
    assert len(contents) == 1
    return contents[0].model_dump(by_alias=True, exclude_none=True)


def _assert_view(view: dict, uri: str, label: str) -> None:
    assert view["uri"] == uri and view["mimeType"] == UI_MIME
    assert f"<h1>{label}</h1>" in view["text"]
    assert view["_meta"]["ui"] == {"csp": CSP, "prefersBorder": True}


async def _flat(target, mode: str) -> None:
    async with _host(target, mode) as host:
        tools = {t.name: t for t in (await host.list_tools()).tools}
        # the first server keeps the view's URI; the second's is rewritten, still in the ui:// scheme
        alpha, beta = tools["alpha__show_board"].meta["ui"], tools["beta__show_board"].meta["ui"]
        assert alpha == {"resourceUri": VIEW, "visibility": ["model", "app"], "csp": CSP}
        assert beta["resourceUri"] != VIEW and beta["resourceUri"].startswith("ui://")
        assert {k: v for k, v in beta.items() if k != "resourceUri"} == {"visibility": ["model", "app"], "csp": CSP}
        # an apps host is shown the app-only tools (it keeps them from its model), pointing at the same views
        assert tools["alpha__refresh_board"].meta["ui"] == {"resourceUri": VIEW, "visibility": ["app"]}
        assert tools["beta__refresh_board"].meta["ui"]["resourceUri"] == beta["resourceUri"]
        _assert_view(await _read_view(host, alpha["resourceUri"]), VIEW, "A")
        _assert_view(await _read_view(host, beta["resourceUri"]), beta["resourceUri"], "B")
        listed = {r.uri: r for r in (await host.list_resources()).resources}
        assert {VIEW, beta["resourceUri"]} <= set(listed) and listed[VIEW].mime_type == UI_MIME
        # app-only tools stay callable (the view calls them through its host)
        assert (await host.call_tool("alpha__refresh_board", {})).content[0].text == "A: refreshed"
        assert (await host.call_tool("beta__refresh_board", {})).content[0].text == "B: refreshed"
        # the host's own declaration reaches a 2026-07-28 server with its call; a session-era
        # server got troupe's, with the one MIME type the spec defines
        alpha_saw = json.loads((await host.call_tool("alpha__client_ui", {})).content[0].text)
        assert alpha_saw == HOST_UI
        beta_saw = json.loads((await host.call_tool("beta__client_ui", {})).content[0].text)
        assert beta_saw == {"mimeTypes": [UI_MIME]}
        assert UI in (host.server_capabilities.extensions or {})
    async with Client(target, mode=mode) as plain:  # a client without apps: no app-only tools to its model
        names = {t.name for t in (await plain.list_tools()).tools}
        assert {"alpha__show_board", "beta__show_board"} <= names
        assert not names & {"alpha__refresh_board", "beta__refresh_board"}
        assert (await plain.call_tool("alpha__refresh_board", {})).content[0].text == "A: refreshed"
        # nothing is declared for it to a server it is relayed to per request
        assert json.loads((await plain.call_tool("alpha__client_ui", {})).content[0].text) is None


async def _meta(target, mode: str) -> None:
    async with _host(target, mode) as host:
        async def meta_tool(tool: str, **arguments) -> dict:
            result = await host.call_tool(tool, arguments)
            assert not result.is_error, result.content
            return json.loads(result.content[0].text)

        uris = {}
        for name, label in (("alpha__show_board", "A"), ("beta__show_board", "B")):
            described = await meta_tool("describe_tool", name=name)
            ui = described["tool"]["_meta"]["ui"]
            assert ui["visibility"] == ["model", "app"] and ui["csp"] == CSP
            uris[label] = ui["resourceUri"]
            got = await host.call_tool("get_resource", {"uri": ui["resourceUri"]})
            _assert_view(got.content[0].resource.model_dump(by_alias=True, exclude_none=True), ui["resourceUri"], label)
            _assert_view(await _read_view(host, ui["resourceUri"]), ui["resourceUri"], label)
        assert uris["A"] == VIEW and uris["B"] != VIEW and uris["B"].startswith("ui://")
        # the model's lists leave the app-only tools out; describe_tool and call_tool still reach them
        listed = {t["name"] for t in (await meta_tool("list_tools", limit=100))["tools"]}
        assert "alpha__show_board" in listed and "alpha__refresh_board" not in listed
        found = {t["name"] for t in (await meta_tool("filter_tools", pattern="board"))["tools"]}
        assert found == {"alpha__show_board", "beta__show_board"}
        assert (await meta_tool("describe_tool", name="beta__refresh_board"))["tool"]["_meta"]["ui"] == {
            "resourceUri": uris["B"], "visibility": ["app"]}
        called = await host.call_tool("call_tool", {"name": "beta__refresh_board", "arguments": {}})
        assert called.content[0].text == "B: refreshed"
        saw = await host.call_tool("call_tool", {"name": "alpha__client_ui", "arguments": {}})
        assert json.loads(saw.content[0].text) == HOST_UI


@pytest.mark.slow  # three FastMCP servers and troupe, per front
@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize("front", ["stdio", "http"])
def test_app_views_reach_the_host_under_their_own_uris_in_flat_mode(tmp_path, apps_servers, front, mode):
    config = write_config(tmp_path, apps_servers, mode="flat")
    if front == "stdio":
        _run(_flat(stdio_params(config), mode))
        return
    t = TroupeHttp(config)
    try:
        _run(_flat(t.url, mode))
    finally:
        assert t.stop() == 0


@pytest.mark.slow
@pytest.mark.parametrize("front", ["stdio", "http"])
def test_app_views_reach_the_host_under_their_own_uris_in_meta_mode(tmp_path, apps_servers, front):
    config = write_config(tmp_path, apps_servers, mode="meta")
    if front == "stdio":
        _run(_meta(stdio_params(config), "auto"))
        return
    t = TroupeHttp(config)
    try:
        _run(_meta(t.url, "legacy"))
    finally:
        assert t.stop() == 0


def test_a_modern_tools_list_with_app_only_tools_depends_on_the_caller_and_is_not_for_shared_caches(
        tmp_path, apps_servers):
    t = Troupe(write_config(tmp_path, apps_servers, mode="flat"))
    try:
        envelope = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {}}
        plain = t.request("tools/list", {"_meta": envelope}, timeout=60)["result"]
        host = t.request("tools/list", {"_meta": {**envelope, "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {UI: {"mimeTypes": [UI_MIME]}}}}}, timeout=60)["result"]
        assert plain["cacheScope"] == host["cacheScope"] == "private"
        assert "alpha__refresh_board" in {x["name"] for x in host["tools"]}
        assert "alpha__refresh_board" not in {x["name"] for x in plain["tools"]}
    finally:
        t.close()
