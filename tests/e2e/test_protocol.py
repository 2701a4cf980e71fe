"""The whole protocol through troupe: server→client requests, progress, logging, resources,
completion, list changes and argument validation, driven by the official SDK client."""
from __future__ import annotations

import asyncio
import json

from mcp import Client, types

from tests.support import peer_bin
from tests.support.troupe import TroupeHttp, server, stdio_params, write_config


def _everything(**extra) -> dict:
    return {"name": "everything", "transport": {"type": "stdio", "stdio": {
        "command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}, **extra}


def _stdio(config, *args):
    return stdio_params(config, *args)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


async def _sampling(context, params: types.CreateMessageRequestParams):
    asked = params.messages[0].content.text
    return types.CreateMessageResult(role="assistant", model="test-model",
                                     content=types.TextContent(type="text", text=f"sampled: {asked[-20:]}"))


async def _elicitation(context, params):
    assert params.message.startswith("[everything] ")  # troupe says which server asks
    props = (params.requested_schema or {}).get("properties", {})
    content = {}
    for key, prop in props.items():
        kind = prop.get("type")
        content[key] = {"string": "x", "boolean": True, "integer": 1, "number": 1.5}.get(kind, "x")
        if prop.get("enum"):
            content[key] = prop["enum"][0]
        if prop.get("format") == "email":
            content[key] = "a@b.example"
        if prop.get("format") == "date":
            content[key] = "2026-01-01"
        if prop.get("format") == "uri":
            content[key] = "https://example.org"
    return types.ElicitResult(action="accept", content=content)


async def _roots(context):
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/troupe-root", name="the-root")])


def _handlers(log: list, notes: list):
    async def logging_callback(params):
        log.append(params)

    async def message_handler(message):
        notes.append(message)
    return dict(sampling_callback=_sampling, elicitation_callback=_elicitation, list_roots_callback=_roots,
                logging_callback=logging_callback, message_handler=message_handler)


async def _wait_for(predicate, timeout=15.0):
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met in time")


def _server_to_client_round_trips(url_or_params, mode):
    log, notes = [], []

    async def scenario():
        async with Client(url_or_params, mode="legacy", **_handlers(log, notes)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            # server-everything adds these only for a client that declared the capabilities
            if "everything__trigger-sampling-request" not in names:
                await _wait_for(lambda: any(isinstance(n, types.ToolListChangedNotification) for n in notes))
                names = {t.name for t in (await client.list_tools()).tools}
            sampled = await client.call_tool("everything__trigger-sampling-request", {"prompt": "hello", "maxTokens": 5})
            assert not sampled.is_error and "sampled:" in json.dumps(sampled.model_dump())
            elicited = await client.call_tool("everything__trigger-elicitation-request", {})
            assert not elicited.is_error and "accept" in json.dumps(elicited.model_dump())
            roots = await client.call_tool("everything__get-roots-list", {})
            assert "troupe-root" in json.dumps(roots.model_dump())
            progress = []

            async def on_progress(value, total, message):
                progress.append(value)
            done = await client.call_tool("everything__trigger-long-running-operation",
                                          {"duration": 1, "steps": 4}, progress_callback=on_progress)
            assert not done.is_error
            assert len(progress) >= 3 and progress == sorted(progress)
    _run(scenario())


def test_sampling_elicitation_roots_and_progress_over_stdio(tmp_path):
    config = write_config(tmp_path, [_everything()], mode="flat")
    _server_to_client_round_trips(_stdio(config), "stdio")


def test_sampling_elicitation_roots_and_progress_over_http(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [_everything()], mode="flat"))
    try:
        _server_to_client_round_trips(t.url, "http")
    finally:
        assert t.stop() == 0


def test_client_without_sampling_gets_an_error_not_a_hang(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [_everything(timeout=10)], mode="flat"))

    async def scenario():
        async with Client(t.url, mode="legacy") as client:  # declares no sampling
            result = await client.call_tool("everything__trigger-sampling-request", {"prompt": "x"})
            assert result.is_error
    try:
        _run(scenario())
    finally:
        t.stop()


def test_logging_resources_subscriptions_completion_and_validation(tmp_path):
    # pin: false: this echo adds a tool on purpose, and this test is about relaying the change
    config = write_config(tmp_path, [_everything(), server("echo", "tests.servers.echo", pin=False)], mode="flat")
    log, notes = [], []

    async def scenario():
        async with Client(_stdio(config), mode="legacy", **_handlers(log, notes)) as client:
            caps = client.server_capabilities
            assert caps.logging is not None and caps.completions is not None and caps.resources.subscribe
            await client.set_logging_level("debug")
            await client.call_tool("everything__toggle-simulated-logging", {})
            await _wait_for(lambda: any(p.logger and p.logger.startswith("everything") for p in log))

            resources = (await client.list_resources()).resources
            uri = str(resources[0].uri)
            read = await client.read_resource(uri)
            assert read.contents and str(read.contents[0].uri) == uri
            templates = (await client.list_resource_templates()).resource_templates
            assert templates
            await client.subscribe_resource(uri)
            await client.call_tool("everything__toggle-subscriber-updates", {})
            await _wait_for(lambda: any(isinstance(n, types.ResourceUpdatedNotification) for n in notes), 20)
            await client.unsubscribe_resource(uri)

            prompts = {p.name: p for p in (await client.list_prompts()).prompts}
            with_completion = next((p for p in prompts.values() if p.arguments), None)
            assert with_completion is not None
            completed = await client.complete(types.PromptReference(type="ref/prompt", name=with_completion.name),
                                              {"name": with_completion.arguments[0].name, "value": ""})
            assert completed.completion is not None

            # arguments checked against the full schema before any server sees them
            bad = await client.call_tool("echo__add", {"a": "one", "b": 2})
            assert bad.is_error and "/a: \"one\" is not of type 'number'" in bad.content[0].text
            missing = await client.call_tool("echo__echo", {})
            assert missing.is_error and "required" in missing.content[0].text
            good = await client.call_tool("echo__add", {"a": 1, "b": 2})
            assert good.structured_content == {"sum": 3}  # structuredContent passes through untouched

            # a list change upstream reaches this client
            notes.clear()
            await client.call_tool("echo__notify_change", {})
            await _wait_for(lambda: any(isinstance(n, types.ToolListChangedNotification) for n in notes))
            assert "echo__late_tool" in {t.name for t in (await client.list_tools()).tools}
    _run(scenario())
