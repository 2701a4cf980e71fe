"""A fresh troupe in front of a server that takes a while to start (tests/servers/fastmcp_slow):
every request that needs the catalogue waits for start-up to settle, as tools/list does, so a
client that starts troupe and at once lists or reads resources, lists or gets prompts, or asks for
a completion gets the slow server's, over stdio and HTTP, in both eras, whatever the client (the
official SDK, the Inspector CLI, langchain-mcp-adapters). And no client hears a list_changed at
start for a list its own listing already showed it, while a genuine later change still reaches it."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess

import pytest
import requests
from mcp import Client, types

from tests.support import PEERS, PYTHON, ROOT, peer_bin
from tests.support.troupe import Troupe, TroupeHttp, server, stdio_params, write_config

pytestmark = pytest.mark.slow  # a fresh troupe and a slow server for each test
STDIO_DELAY = "2"  # the slow server's start; troupe starts with its stdio client, so it is still starting
HTTP_DELAY = "4"  # troupe's HTTP front announces itself before this: the client's requests come first
PROMPT, README, NOTE = "notes__summarize", "notes://readme", "notes://note/first"


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def _slow(delay: str) -> dict:
    return server("notes", "tests.servers.fastmcp_slow", "--delay", delay)


def _echo() -> dict:
    return server("echo", "tests.servers.echo", pin=False)  # pin: false: its notify_change adds a tool on purpose


def _starting(t: TroupeHttp) -> bool:
    status = requests.get(t.base + "/status", timeout=10).json()
    return next(s for s in status["servers"] if s["name"] == "notes")["state"] == "starting"


async def _everything_at_once(client: Client) -> None:
    """All at once, as a client does right after connecting: each waits for the slow server."""
    resources, templates, prompts, readme, note, prompt, completed = await asyncio.gather(
        client.list_resources(), client.list_resource_templates(), client.list_prompts(),
        client.read_resource(README), client.read_resource(NOTE), client.get_prompt(PROMPT, {"topic": "actors"}),
        client.complete(types.PromptReference(type="ref/prompt", name=PROMPT), {"name": "topic", "value": "a"}))
    assert README in {str(r.uri) for r in resources.resources}
    assert "notes://note/{name}" in {t.uri_template for t in templates.resource_templates}
    assert PROMPT in {p.name for p in prompts.prompts}
    assert readme.contents[0].text == "These are the slow notes."
    assert note.contents[0].text == "note first"
    assert "actors" in str(prompt.messages[0].content)
    assert completed.completion.values == ["actors", "agents"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # auto: the SDK speaks 2026-07-28 to troupe
def test_resources_prompts_and_completion_right_after_start_over_stdio(tmp_path, mode):
    config = write_config(tmp_path, [_slow(STDIO_DELAY)], mode="flat")

    async def scenario():
        async with Client(stdio_params(config), mode=mode) as client:
            await _everything_at_once(client)
    _run(scenario())


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_resources_prompts_and_completion_right_after_start_over_http(tmp_path, mode):
    t = TroupeHttp(write_config(tmp_path, [_slow(HTTP_DELAY)], mode="flat"))
    try:
        assert _starting(t), "the slow server was ready before the client came: this test would show nothing"

        async def scenario():
            async with Client(t.url, mode=mode) as client:
                await _everything_at_once(client)
        _run(scenario())
    finally:
        assert t.stop() == 0


def test_meta_tools_reach_a_starting_servers_resource_and_prompt_over_legacy_sse(tmp_path):
    from mcp import ClientSession
    from mcp.client.sse import sse_client
    t = TroupeHttp(write_config(tmp_path, [_slow(HTTP_DELAY)], mode="meta"))
    try:
        assert _starting(t)

        async def scenario():
            async with sse_client(t.base + "/sse") as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                readme, prompt, resources = await asyncio.gather(
                    session.call_tool("get_resource", {"uri": README}),
                    session.call_tool("get_prompt", {"name": PROMPT, "arguments": {"topic": "gevent"}}),
                    session.read_resource(README))
                assert not readme.is_error and readme.content[0].resource.text == "These are the slow notes."
                assert not prompt.is_error and "gevent" in prompt.content[0].text
                assert resources.contents[0].text == "These are the slow notes."
        _run(scenario())
    finally:
        assert t.stop() == 0


def test_a_waiting_request_is_withdrawn_by_its_cancel_and_the_wait_is_bounded(tmp_path):
    """startup_wait bounds the wait (the server here takes a minute): then each request is answered
    with what there is. A cancelled one is never answered: it had waited first, and would have been
    answered first."""
    t = Troupe(write_config(tmp_path, [_slow("60")], mode="flat", startup_wait=1.5))
    try:
        t.initialize()
        cancelled = t.send_request("resources/read", {"uri": README})
        waiting = [t.send_request(m, p) for m, p in (("prompts/list", None), ("resources/read", {"uri": README}),
                                                     ("prompts/get", {"name": PROMPT, "arguments": {"topic": "x"}}))]
        t.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": cancelled}})
        prompts, read, got = (t.wait_response(rid, timeout=30) for rid in waiting)
        assert prompts["result"]["prompts"] == []  # answered with what there was once the wait ran out
        assert read["error"]["code"] == -32002 and got["error"]["code"] == -32602  # not found, not hung
        assert not [m for m in t.received if m.get("id") == cancelled]
    finally:
        t.close()


# ---------------------------------------------------------------- list_changed at start


async def _listed_then_one_real_change(client: Client, notes: list) -> None:
    """The client lists everything at start (each list waits for the slow server), then echo adds a
    tool: the one notice the client gets is that change's, nothing for what its lists showed."""
    tools, _, _ = await asyncio.gather(client.list_tools(), client.list_resources(), client.list_prompts())
    assert "notes__word_count" in {t.name for t in tools.tools}
    before = len(notes)
    await client.call_tool("echo__notify_change", {})  # echo announces before it answers
    wait = asyncio.get_running_loop().time() + 20
    while not any(isinstance(n, types.ToolListChangedNotification) for n in notes[before:]):
        assert asyncio.get_running_loop().time() < wait, f"no list_changed for the new tool; got {notes}"
        await asyncio.sleep(0.02)
    # the client's stream is ordered: a notice from start-up would have come before this one
    changes = [type(n).__name__ for n in notes if "ListChanged" in type(n).__name__]
    assert changes == ["ToolListChangedNotification"], changes
    assert "echo__late_tool" in {t.name for t in (await client.list_tools()).tools}


def test_no_list_changed_at_start_for_lists_already_seen_over_stdio(tmp_path):
    config = write_config(tmp_path, [_echo(), _slow(STDIO_DELAY)], mode="flat")
    notes: list = []

    async def on_message(message) -> None:
        notes.append(message)

    async def scenario():
        async with Client(stdio_params(config), mode="legacy", message_handler=on_message) as client:
            await _listed_then_one_real_change(client, notes)
    _run(scenario())


def test_no_list_changed_at_start_for_lists_already_seen_over_http(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [_echo(), _slow(HTTP_DELAY)], mode="flat"))
    notes: list = []

    async def on_message(message) -> None:
        notes.append(message)
    try:
        assert _starting(t)

        async def scenario():
            async with Client(t.url, mode="legacy", message_handler=on_message) as client:
                await _listed_then_one_real_change(client, notes)
        _run(scenario())
    finally:
        assert t.stop() == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_listen_stream_opened_at_start_tells_only_of_a_real_change(tmp_path, transport):
    """2026-07-28: a subscriptions/listen stream opened during start-up is acknowledged once start-up
    has settled, and does not then announce start-up's own changes to the lists."""
    delay = STDIO_DELAY if transport == "stdio" else HTTP_DELAY
    config = write_config(tmp_path, [_echo(), _slow(delay)], mode="flat")
    t = TroupeHttp(config) if transport == "http" else None
    try:
        assert t is None or _starting(t)

        async def scenario():
            async with Client(stdio_params(config) if t is None else t.url) as client:
                events: list = []
                async with client.listen(tools_list_changed=True, prompts_list_changed=True,
                                         resources_list_changed=True) as stream:
                    async def collect():
                        async for event in stream:
                            events.append(type(event).__name__)
                    collecting = asyncio.create_task(collect())
                    assert "notes__word_count" in {t.name for t in (await client.list_tools()).tools}
                    before = len(events)
                    await client.call_tool("echo__notify_change", {})
                    wait = asyncio.get_running_loop().time() + 20
                    while len(events) == before:
                        assert asyncio.get_running_loop().time() < wait, "no event for the new tool"
                        await asyncio.sleep(0.02)
                    assert "echo__late_tool" in {t.name for t in (await client.list_tools()).tools}
                    collecting.cancel()
                assert len(events) == 1 and "Tool" in events[0], events  # that change's, and nothing from start-up
        _run(scenario())
    finally:
        if t is not None:
            assert t.stop() == 0


# ---------------------------------------------------------------- other real clients, a fresh troupe each


def _troupe_command(config) -> list[str]:
    return [PYTHON, "-m", "actors.main", "--config", str(config)]


def _inspector(config, *args: str) -> dict:
    # The Inspector hands a server it launches only a few variables: this test's config directory
    # (approvals and pins, see tests/conftest.py) goes to troupe explicitly.
    env = ["-e", f"TROUPE_CONFIG_DIR={os.environ['TROUPE_CONFIG_DIR']}"]
    proc = subprocess.run([peer_bin("mcp-inspector"), "--cli", *env, "--", *_troupe_command(config), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_inspector_cli_reads_a_resource_and_gets_a_prompt_of_a_starting_server(tmp_path):
    config = write_config(tmp_path, [_slow(STDIO_DELAY)], mode="flat")
    read = _inspector(config, "--method", "resources/read", "--uri", README)
    assert read["contents"][0]["text"] == "These are the slow notes."
    got = _inspector(config, "--method", "prompts/get", "--prompt-name", PROMPT, "--prompt-args", "topic=actors")
    assert "actors" in got["messages"][0]["content"]["text"]


def test_langchain_adapters_read_a_resource_and_get_a_prompt_of_a_starting_server(tmp_path):
    venv_python = PEERS / "langchain-venv" / "bin" / "python"
    assert venv_python.exists(), f"langchain-mcp-adapters not installed at {venv_python}: run .ci/run"
    config = write_config(tmp_path, [_slow(STDIO_DELAY)], mode="flat")
    proc = subprocess.run([str(venv_python), str(ROOT / "tests" / "support" / "langchain_client.py"),
                           "--uri", README, "--prompt", PROMPT, "--arg", "topic=actors", "--", *_troupe_command(config)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["resource"] == ["These are the slow notes."]
    assert len(got["prompt"]) == 1 and "actors" in got["prompt"][0]

