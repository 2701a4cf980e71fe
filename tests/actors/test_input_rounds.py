"""A Session's input rounds in process, in front of real servers (a modern-only one asking through
input_required, the echo server standing in for a legacy one whose elicitation is injected): the
state troupe hands out is sealed and opens only for the same caller and arguments; a parked
call resumes once, is bounded in number and in time; a legacy client is asked for real, for a
bounded number of rounds."""
from __future__ import annotations

import pykka
import pytest

from actors.downstream import input_rounds
from actors.downstream.session import Session
from actors.messages import ClientMessage, ServerRequest, UpstreamError
from actors.protocol import mcp, modern
from actors.runtime import Runtime
from actors.settings import config
from tests.support import PYTHON, ROOT, wait_until

ELICITS = {modern.META_CAPABILITIES: {"elicitation": {}}}


@pytest.fixture
def runtime(tmp_path):
    stdio = {"type": "stdio", "stdio": {"command": PYTHON, "work_dir": str(ROOT)}}
    cfg = config.from_data({"servers": [
        {"name": "echo", "timeout": 10, "transport": {**stdio, "stdio": {**stdio["stdio"], "args": [
            "-m", "tests.servers.echo"]}}},
        {"name": "modern", "timeout": 10, "pin": False, "transport": {**stdio, "stdio": {**stdio["stdio"], "args": [
            "-m", "tests.servers.modern_only"]}}}],
        "serve": {"mode": "flat", "state_key": "k" * 32}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.settled.is_set() and rt.catalogue().tool("modern__confirm") is not None
               and rt.catalogue().tool("echo__sleep") is not None, 20, message="servers listed")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _modern(rid, name, args, **meta) -> dict:
    params = {"name": name, "arguments": args,
              "_meta": {modern.META_VERSION: mcp.MODERN, modern.META_CAPABILITIES: {}, **meta}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def _retry(first: dict, rid, result: dict, responses: dict) -> dict:
    return {**first, "id": rid, "params": {**first["params"], "requestState": result["requestState"],
                                           "inputResponses": responses}}


class _Client:
    """Streams per request id, and a principal per send (the shared HTTP Session serves many)."""

    def __init__(self, runtime, key: str) -> None:
        self.told: list = []
        self.session = Session.start(runtime, notify=self.told.append, key=key, mode="flat")
        self.streams: dict = {}

    def send(self, message: dict, principal: str = "") -> list:
        stream = self.streams.setdefault(message.get("id"), [])
        self.session.tell(ClientMessage(message, stream.append, principal))
        return stream

    def answer(self, message: dict, principal: str = "", timeout: float = 15.0) -> dict:
        stream = self.send(message, principal)
        wait_until(lambda: any("id" in m and "method" not in m for m in stream), timeout, message=str(message["id"]))
        return next(m for m in stream if "id" in m and "method" not in m)


def test_a_modern_servers_state_is_sealed_and_opens_only_for_the_same_caller_and_arguments(runtime):
    c = _Client(runtime, "seal")
    first = _modern(1, "modern__confirm", {"rounds": 1}, **ELICITS)
    asked = c.answer(first, "alice")["result"]
    assert asked["resultType"] == "input_required"
    assert asked["inputRequests"]["q1"]["params"]["message"] == "[modern] Confirm step 1?"
    state = asked["requestState"]
    assert state.startswith("troupe1.") and state != "confirm"  # the server's own state never leaves troupe bare
    yes = {"q1": {"action": "accept", "content": {"ok": True}}}
    tampered = {**asked, "requestState": state[:-2] + ("AA" if not state.endswith("AA") else "BB")}
    assert c.answer(_retry(first, 2, tampered, yes), "alice")["error"]["code"] == -32602
    other_args = _retry({**first, "params": {**first["params"], "arguments": {"rounds": 5}}}, 3, asked, yes)
    assert "another request" in c.answer(other_args, "alice")["error"]["message"]
    assert "another request" in c.answer(_retry(first, 4, asked, yes), "mallory")["error"]["message"]
    # answers with no state reach the server, which alone knows they answer nothing and asks again
    no_state = {**first, "id": 5, "params": {**first["params"], "inputResponses": yes}}
    assert c.answer(no_state, "alice")["result"]["resultType"] == "input_required"
    done = c.answer(_retry(first, 6, asked, yes), "alice")["result"]
    assert done["resultType"] == "complete" and done["content"][0]["text"] == 'confirmed accept:{"ok":true}'
    c.session.stop()


def test_a_parked_call_resumes_once_with_the_clients_answer(runtime):
    c = _Client(runtime, "park")
    first = _modern(1, "echo__sleep", {"seconds": 1}, **ELICITS)
    stream = c.send(first)
    replies: list = []
    # the Session's first forwarded call has token 1: the legacy server asks in its middle
    c.session.tell(ServerRequest("echo", 77, "elicitation/create", {"message": "sure?"}, replies.append,
                                 origin_request=1))
    wait_until(lambda: stream, 5, message="input_required")
    asked = stream[0]["result"]
    assert asked["resultType"] == "input_required" and list(asked["inputRequests"]) == ["echo-1"]
    assert replies == []  # the server's request waits for the retry
    done = c.answer(_retry(first, 2, asked, {"echo-1": {"action": "accept", "content": {"sure": True}}}))
    assert replies == [{"action": "accept", "content": {"sure": True}}]  # the server got the client's answer
    assert done["result"]["content"][0]["text"] == "slept"  # and the retry got the call's own result
    again = c.answer(_retry(first, 3, asked, {"echo-1": {"action": "decline"}}))
    assert "no longer waiting" in again["error"]["message"]  # a state resumes its call once
    c.session.stop()


def test_parked_calls_are_bounded_in_number_and_in_time(runtime, monkeypatch):
    monkeypatch.setattr(input_rounds, "MAX_PARKED", 1)
    monkeypatch.setattr(input_rounds, "PARK_TTL_S", 0.5)
    c = _Client(runtime, "bounds")
    parked = c.send(_modern(1, "echo__sleep", {"seconds": 5}, **ELICITS))
    crowded = c.send(_modern(2, "echo__sleep", {"seconds": 1}, **ELICITS))
    first: list = []
    second: list = []
    c.session.tell(ServerRequest("echo", 1, "elicitation/create", {"message": "a"}, first.append, origin_request=1))
    wait_until(lambda: parked, 5, message="the first call parked")
    c.session.tell(ServerRequest("echo", 2, "elicitation/create", {"message": "b"}, second.append, origin_request=2))
    wait_until(lambda: second, 5, message="the second request refused")
    assert isinstance(second[0], UpstreamError) and "calls waiting" in second[0].message
    wait_until(lambda: crowded, 10, message="the second call answered")  # its server carried on
    assert crowded[0]["result"]["resultType"] == "complete"
    # nobody retries the parked one: its server hears no, and the call is cancelled upstream
    wait_until(lambda: first, 5, message="the parked request expired")
    assert isinstance(first[0], UpstreamError) and first[0].code == -32001 and "did not retry" in first[0].message
    c.session.stop()


def test_a_legacy_client_is_asked_for_real_for_a_bounded_number_of_rounds(runtime, monkeypatch):
    monkeypatch.setattr(input_rounds, "MAX_ROUNDS", 3)
    c = _Client(runtime, "bridge")
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}}
    assert c.answer(init)["result"]["protocolVersion"] == "2025-11-25"
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "modern__confirm",
                                                                          "arguments": {"rounds": 2}}}
    stream = c.send(call)
    for step in (1, 2):
        wait_until(lambda step=step: len([m for m in stream if m.get("method") == "elicitation/create"]) == step, 10,
                   message=f"round {step} asked")
        ask = [m for m in stream if m.get("method") == "elicitation/create"][-1]
        assert ask["params"]["message"] == f"[modern] Confirm step {step}?"
        c.session.tell(ClientMessage({"jsonrpc": "2.0", "id": ask["id"], "result": {
            "action": "accept", "content": {"ok": step == 1}}}, stream.append))
    wait_until(lambda: any("result" in m and m.get("id") == 1 for m in stream), 10, message="the call answered")
    result = next(m for m in stream if m.get("id") == 1)["result"]
    assert result["content"][0]["text"] == 'confirmed accept:{"ok":true}, accept:{"ok":false}'
    assert "resultType" not in result or result["resultType"] == "complete"
    # more rounds than troupe allows: an error naming the server, not an endless exchange
    many = c.send({**call, "id": 2, "params": {"name": "modern__confirm", "arguments": {"rounds": 9}}})

    def answer_all() -> bool:
        for m in [m for m in many if m.get("method") == "elicitation/create" and m["id"] not in answered]:
            answered.add(m["id"])
            c.session.tell(ClientMessage({"jsonrpc": "2.0", "id": m["id"], "result": {"action": "accept",
                                                                                     "content": {"ok": True}}},
                                         many.append))
        return any(m.get("id") == 2 for m in many)
    answered: set = set()
    wait_until(answer_all, 15, message="the long call answered")
    last = next(m for m in many if m.get("id") == 2)["result"]
    assert last["isError"] and "input asked 3 times" in last["content"][0]["text"] and len(answered) == 3
    c.session.stop()
