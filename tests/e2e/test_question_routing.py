"""The right client, or nobody: a server's question (elicitation/create) in the middle of a call
goes only to the client whose call asked it. Two real SDK clients (alice, who sees everything,
and bob, whose profile hides the asking tool) share one troupe over Streamable HTTP, in front of
a stdio server and a FastMCP Streamable HTTP server that ask in the middle of `ask`.

- Over Streamable HTTP troupe knows which call's response stream carried the question: alice is
  asked, and her tool gets her answer, while bob's call to the same server is in flight.
- Over stdio troupe cannot tell whose call asked while calls of both are in flight: the question
  is refused upstream and nobody is asked; with alice alone in flight, she is asked.
- With `share: per_client` each client has its own stdio upstream: alice is always asked, and
  only she.
"""
from __future__ import annotations

import asyncio
import sys

import pytest
import yaml
from mcp import Client, types
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from tests.support.ports import start_announced, stop
from tests.support.troupe import TroupeHttp, server, write_config

TOKENS = {"alice": "alice-token-3b81f0", "bob": "bob-token-c07a2e"}
ASK_DELAY_S = 0.8  # the server asks this long into alice's call; bob's call starts meanwhile
BOB_STARTS_S = 0.2


@pytest.fixture(scope="module")
def asker_http(tmp_path_factory):
    log = tmp_path_factory.mktemp("asker") / "asker.log"
    proc, port = start_announced([sys.executable, "-m", "tests.servers.fastmcp_asker", "--port", "0"], log)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.fixture
def troupe(tmp_path, asker_http):
    config = write_config(tmp_path, [
        server("asker", "tests.servers.question_asker", pin=False),
        server("askerp", "tests.servers.question_asker", pin=False, share="per_client"),
        {"name": "askerh", "pin": False,
         "transport": {"type": "streamable-http", "streamable_http": {"url": asker_http}}}],
        mode="flat", clients=[{"name": "alice", "token": TOKENS["alice"], "profile": "all"},
                              {"name": "bob", "token": TOKENS["bob"], "profile": "slowpoke"}])
    data = yaml.safe_load(config.read_text())
    data["profiles"] = {"all": {}, "slowpoke": {"tools": {"allow": ["asker__slow", "askerh__slow", "askerp__slow"]}}}
    config.write_text(yaml.safe_dump(data))
    t = TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path)})
    yield t
    assert t.stop() == 0


def _client(url: str, name: str, asked: list):
    async def answer(context, params: types.ElicitRequestParams):
        asked.append((name, params.message))
        props = (params.requested_schema or {}).get("properties", {})
        return types.ElicitResult(action="accept", content={key: name for key in props})
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKENS[name]}"})
    return Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=answer)


def _text(result) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "text", None))


async def _alice_asks_while_bob_waits(url: str, server_name: str, with_bob: bool) -> tuple[str, str, list]:
    asked: list = []
    async with _client(url, "alice", asked) as alice, _client(url, "bob", asked) as bob:
        ask = asyncio.create_task(alice.call_tool(f"{server_name}__ask", {"tag": "of-alice", "delay": ASK_DELAY_S}))
        slow_text = ""
        if with_bob:
            await asyncio.sleep(BOB_STARTS_S)
            slow_text = _text(await bob.call_tool(f"{server_name}__slow", {"seconds": 2 * ASK_DELAY_S}))
        return _text(await ask), slow_text, asked


def test_over_streamable_http_the_question_reaches_the_caller_whose_stream_carried_it(troupe):
    alone, _, asked_alone = asyncio.run(asyncio.wait_for(
        _alice_asks_while_bob_waits(troupe.url, "askerh", with_bob=False), 60))
    assert alone == "answer: alice" and [who for who, _ in asked_alone] == ["alice"]
    both, slow, asked = asyncio.run(asyncio.wait_for(
        _alice_asks_while_bob_waits(troupe.url, "askerh", with_bob=True), 60))
    assert slow == "slow done"
    assert both == "answer: alice", both  # her own answer, never bob's
    assert [who for who, _ in asked] == ["alice"] and "of-alice" in asked[0][1]  # bob was never asked


def test_over_stdio_a_question_troupe_cannot_attribute_is_refused_and_nobody_is_asked(troupe):
    alone, _, asked_alone = asyncio.run(asyncio.wait_for(
        _alice_asks_while_bob_waits(troupe.url, "asker", with_bob=False), 60))
    assert alone == "answer: alice" and [who for who, _ in asked_alone] == ["alice"]
    both, slow, asked = asyncio.run(asyncio.wait_for(
        _alice_asks_while_bob_waits(troupe.url, "asker", with_bob=True), 60))
    assert slow == "slow done"
    assert asked == []  # neither client was asked: bob's profile hides `ask`, and alice's call cannot be told apart
    assert both.startswith("refused:") and "cannot tell whose call asked" in both and "per_client" in both, both


def test_with_share_per_client_each_clients_own_upstream_asks_that_client_only(troupe):
    both, slow, asked = asyncio.run(asyncio.wait_for(
        _alice_asks_while_bob_waits(troupe.url, "askerp", with_bob=True), 60))
    assert slow == "slow done"
    assert both == "answer: alice", both
    assert [who for who, _ in asked] == ["alice"]
