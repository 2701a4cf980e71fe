"""A server's questions to the person cross the eras through troupe, driven by the official SDK
client in each era over stdio and HTTP: a legacy server (server-everything) elicits and samples
in the middle of a call, and a modern-only server asks through input_required rounds (two).

    modern client → legacy server: troupe parks the call, the client hears input_required
    legacy client → modern server: troupe asks the client for real, then retries upstream
    modern client → modern server: troupe passes the rounds through, the server's state sealed
    legacy client → legacy server: relayed as before
"""
from __future__ import annotations

import asyncio
import json

import pytest
from mcp import Client, types

from tests.e2e.test_protocol import _elicitation, _sampling
from tests.support import peer_bin
from tests.support.troupe import TroupeHttp, server, stdio_params, write_config

MODERN = "2026-07-28"


def _config(tmp_path):
    return write_config(tmp_path, [
        {"name": "everything", "transport": {"type": "stdio", "stdio": {
            "command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}},
        server("modern", "tests.servers.modern_only", pin=False)], mode="flat")


def _text(result) -> str:
    return " ".join(c.text for c in result.content if getattr(c, "text", None))


async def _both_servers_ask(target, mode: str) -> list[str]:
    """Each server asks through troupe; the answers reach it; returns what the person was shown."""
    shown: list[str] = []

    async def answer(context, params: types.ElicitRequestParams):
        shown.append(params.message)
        if params.message.startswith("[modern] "):
            return types.ElicitResult(action="accept", content={"ok": True})
        return await _elicitation(context, params)

    async with Client(target, mode=mode, elicitation_callback=answer, sampling_callback=_sampling) as client:
        assert client.protocol_version == (MODERN if mode == MODERN else "2025-11-25")
        elicited = await client.call_tool("everything__trigger-elicitation-request", {})
        assert not elicited.is_error and "accept" in json.dumps(elicited.model_dump()), elicited
        sampled = await client.call_tool("everything__trigger-sampling-request", {"prompt": "hello", "maxTokens": 5})
        assert not sampled.is_error and "sampled:" in json.dumps(sampled.model_dump()), sampled
        confirmed = await client.call_tool("modern__confirm", {"rounds": 2})
        assert not confirmed.is_error, confirmed
        assert _text(confirmed) == 'confirmed accept:{"ok":true}, accept:{"ok":true}'
    return shown


def _check_shown(shown: list[str]) -> None:
    # one question from the legacy server, two rounds from the modern one, each labelled with its server
    assert len(shown) == 3, shown
    assert shown[0].startswith("[everything] ")
    assert shown[1:] == ["[modern] Confirm step 1?", "[modern] Confirm step 2?"]


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_both_servers_ask_a_client_over_stdio(tmp_path, mode):
    params = stdio_params(_config(tmp_path), env={"TROUPE_CONFIG_DIR": str(tmp_path)})
    _check_shown(asyncio.run(asyncio.wait_for(_both_servers_ask(params, mode), 90)))


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_both_servers_ask_a_client_over_http(tmp_path, mode):
    t = TroupeHttp(_config(tmp_path), env={"TROUPE_CONFIG_DIR": str(tmp_path)})
    try:
        _check_shown(asyncio.run(asyncio.wait_for(_both_servers_ask(t.url, mode), 90)))
    finally:
        assert t.stop() == 0
    if mode == MODERN:  # the key that sealed the rounds' state was generated once and kept private
        key = tmp_path / "state.key"
        assert key.exists() and key.stat().st_mode & 0o077 == 0
