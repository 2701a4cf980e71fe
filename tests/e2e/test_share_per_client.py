"""`share: per_client`: each downstream client its own upstream process, started on its first call
(which waits for it), shown in /status, stopped when the client leaves; the questions an upstream
asks reach its own client only. Real troupe, real SDK clients over Streamable HTTP, a real stdio
server that reports its pid (tests/servers/asker.py)."""
from __future__ import annotations

import asyncio
import time

import requests
from mcp import Client, types

from tests.support import wait_until
from tests.support.troupe import children_of, pid_alive, server
from tests.e2e.test_modern_http import _body, _headers, _post, _request

START_DELAY = 0.6  # the asker sleeps this long before it serves: a first call has to wait for it
LEAVE_WITHIN = 5.0  # a client's own upstream process is gone this soon after its client leaves


def _asker(**extra) -> dict:
    return server("asker", "tests.servers.asker", "--start-delay", str(START_DELAY), share="per_client", **extra)


def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def _status(t) -> dict:
    entry = next(s for s in requests.get(t.base + "/status", timeout=10).json()["servers"] if s["name"] == "asker")
    assert entry["share"] == "per_client"
    return entry


def _client(t, answer: str, asked: list, delay: float = 0.0) -> Client:
    """An SDK client over Streamable HTTP whose elicitation callback notes each question and answers `answer`."""
    async def elicitation(context, params):
        asked.append(params.message)
        await asyncio.sleep(delay)
        return types.ElicitResult(action="accept", content={"answer": answer})
    return Client(t.url, mode="legacy", elicitation_callback=elicitation)


async def _text(client, tool: str, **args) -> str:
    result = await client.call_tool(f"asker__{tool}", args)
    assert not result.is_error, result
    return result.content[0].text


def test_each_client_gets_its_own_process_started_on_first_use_and_stopped_when_it_leaves(http_troupe):
    t = http_troupe([_asker()], mode="flat")
    template = wait_until(lambda: _status(t)["pid"], 20, message="the server's own (listing) process")
    assert _status(t)["per_client"]["count"] == 0  # nothing per client before a client calls

    async def scenario():
        async with _client(t, "b", []) as b:
            async with _client(t, "a", []) as a:
                started = time.monotonic()
                pid_a = int(await _text(a, "whoami"))  # waits for A's own process to start, then answers
                waited = time.monotonic() - started
                pid_b = int(await _text(b, "whoami"))
                assert waited >= START_DELAY * 0.9, f"A's first call took {waited:.2f}s: it did not wait for a start"
                assert len({pid_a, pid_b, template}) == 3, (pid_a, pid_b, template)
                assert {pid_a, pid_b} <= set(children_of(t.proc.pid))  # troupe's own children
                assert int(await _text(a, "whoami")) == pid_a and int(await _text(b, "whoami")) == pid_b  # kept
                entry = _status(t)["per_client"]
                assert entry["count"] == 2 and entry["states"] == {"ready": 2}, entry
                assert {u["pid"] for u in entry["upstreams"]} == {pid_a, pid_b}
                assert all(u["client"] is None and u["restarts"] == 0 for u in entry["upstreams"])
            # A left (the SDK ends its session): A's process goes, B's stays
            await asyncio.to_thread(wait_until, lambda: not pid_alive(pid_a), LEAVE_WITHIN, 0.05,
                                    "A's own upstream to exit after A left")
            assert pid_alive(pid_b)
            entry = _status(t)["per_client"]
            assert entry["count"] == 1 and entry["upstreams"][0]["pid"] == pid_b
            assert int(await _text(b, "whoami")) == pid_b
        return pid_b
    pid_b = _run(scenario())
    wait_until(lambda: not pid_alive(pid_b), LEAVE_WITHIN, 0.05, "B's own upstream to exit after B left")
    assert _status(t)["per_client"]["count"] == 0
    assert pid_alive(template)  # the server's own process (the catalogue's) is not a client's


def test_a_question_from_a_clients_own_upstream_reaches_that_client_only(http_troupe):
    t = http_troupe([_asker()], mode="flat")
    wait_until(lambda: _status(t)["state"] == "ready", 20, message="asker ready")
    asked_a, asked_b = [], []

    async def scenario():
        async with _client(t, "from-a", asked_a, delay=0.5) as a, _client(t, "from-b", asked_b) as b:
            pid_a, pid_b = int(await _text(a, "whoami")), int(await _text(b, "whoami"))
            # A's question is pending while B's call is in flight: B (the newest caller) is not asked
            ask = asyncio.create_task(_text(a, "ask"))
            await asyncio.sleep(0.2)
            slow = await _text(b, "slow", seconds=0.8)
            assert await ask == f"{pid_a} got accept from-a"
            assert slow == str(pid_b)
            assert asked_a == [f"[asker] question from {pid_a}"] and asked_b == []
            assert await _text(b, "ask") == f"{pid_b} got accept from-b"
            assert asked_b == [f"[asker] question from {pid_b}"] and len(asked_a) == 1
            # asked outside any call: still its one client's question
            assert await _text(a, "ask_later", delay=0.3) == "scheduled"
            await _wait(lambda: len(asked_a) == 2)
            assert asked_a[1] == f"[asker] later question from {pid_a}" and len(asked_b) == 1
            await _wait_for_text(a, "answers", "accept from-a")
    _run(scenario())


def test_a_clients_own_upstream_is_restarted_after_a_crash(http_troupe):
    t = http_troupe([_asker(restart={"min_backoff": 0.1, "max_backoff": 0.2})], mode="flat")
    wait_until(lambda: _status(t)["state"] == "ready", 20, message="asker ready")

    async def scenario():
        async with _client(t, "a", []) as a:
            first = int(await _text(a, "whoami"))
            crashed = await a.call_tool("asker__crash", {})
            assert crashed.is_error  # the call the process died under fails, naming the server
            await asyncio.to_thread(wait_until, lambda: _status(t)["per_client"]["upstreams"][0]["restarts"] == 1
                                    and _status(t)["per_client"]["states"] == {"ready": 1}, 15, 0.05,
                                    "A's own upstream restarted")
            second = int(await _text(a, "whoami"))
            assert second != first and not pid_alive(first)
            assert _status(t)["state"] == "ready"  # the server's own process did not restart
    _run(scenario())


def test_an_anonymous_stateless_caller_is_refused_with_a_clear_error(http_troupe):
    t = http_troupe([_asker()], mode="flat")
    wait_until(lambda: _status(t)["state"] == "ready", 20, message="asker ready")
    body = _body(_post(t, _request(7, "tools/call", name="asker__whoami", arguments={}),
                       _headers("tools/call", "asker__whoami")))
    text = body["result"]["content"][0]["text"] if "result" in body else body["error"]["message"]
    assert "share: per_client" in text and "serve.clients" in text, body
    assert _status(t)["per_client"]["count"] == 0


async def _wait(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def _wait_for_text(client, tool: str, wanted: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while (text := await _text(client, tool)) != wanted:
        assert time.monotonic() < deadline, f"{tool} says {text!r}, not {wanted!r}"
        await asyncio.sleep(0.05)


def test_over_the_stdio_front_the_one_client_gets_its_own_process_which_ends_with_it(make):
    t = make([_asker()])
    own = int(_text_of(t.call("asker__whoami")))
    entry = t.server_status("asker")
    assert own != entry["pid"] and entry["per_client"]["count"] == 1
    assert entry["per_client"]["upstreams"][0]["pid"] == own and own in children_of(t.proc.pid)
    assert t.close() == 0
    wait_until(lambda: not pid_alive(own), LEAVE_WITHIN, 0.05, "its own upstream to exit with troupe")


def _text_of(response: dict) -> str:
    assert not response["result"].get("isError"), response
    return response["result"]["content"][0]["text"]
