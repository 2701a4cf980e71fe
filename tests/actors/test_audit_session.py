"""The audit trail's hooks on the Session's own answer paths, against the real classes: a call its
Connection never answers is ended by the Session's deadline (a `timeout` line), and the calls of
a client that leaves are `cancelled`; each with its one line, written once the runtime stops."""
from __future__ import annotations

import time

import orjson
import pykka
import pytest

from actors.messages import ClientMessage, Forward
from actors.ops import audit_file
from actors.runtime import Runtime
from actors.settings import config
from actors.upstream.connection import Connection
from actors.downstream.session import DEADLINE_MARGIN, Session
from tests.support import PYTHON, ROOT, wait_until

TIMEOUT = 1.0  # the echo server's per-request timeout here


@pytest.fixture
def runtime(tmp_path):
    cfg = config.from_data({"servers": [{"name": "echo", "timeout": TIMEOUT, "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", "tests.servers.echo"], "work_dir": str(ROOT)}}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}, "audit": {"file": str(tmp_path / "a.jsonl")}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.connection("echo") is not None, 15, message="echo ready")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _call(rid: int, tool: str, arguments: dict, sink) -> ClientMessage:
    return ClientMessage({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                          "params": {"name": tool, "arguments": arguments}}, sink)


def _lines(rt) -> list[dict]:
    rt.stop()  # the writer writes what is queued before it closes the file
    return [orjson.loads(line) for line in audit_file.read_lines(rt.config.audit.file)]


def test_a_call_its_connection_never_answers_is_a_timeout_line_from_the_sessions_deadline(runtime, monkeypatch):
    original = Connection.on_receive

    def on_receive(self, message):  # the Forward is lost: only the Session's deadline can end the call
        if isinstance(message, Forward) and message.method == "tools/call":
            return None
        return original(self, message)
    monkeypatch.setattr(Connection, "on_receive", on_receive)
    answers: list = []
    session = Session.start(runtime, notify=None, key="deadline", mode="flat")
    began = time.monotonic()
    session.tell(_call(1, "echo__echo", {"text": "lost"}, answers.append))
    wait_until(lambda: answers, TIMEOUT + DEADLINE_MARGIN + 5, message="the deadline's answer")
    assert time.monotonic() - began >= TIMEOUT + DEADLINE_MARGIN - 0.1
    session.stop()
    [line] = _lines(runtime)
    assert (line["session"], line["target"], line["outcome"], line["code"]) == ("deadline", "echo", "timeout", -32001)
    assert line["duration_ms"] >= (TIMEOUT + DEADLINE_MARGIN) * 1000 - 100


def test_the_calls_of_a_client_that_leaves_are_cancelled_lines(runtime):
    answers: list = []
    session = Session.start(runtime, notify=None, key="leaving", mode="flat")
    for rid in (1, 2):
        session.tell(_call(rid, "echo__sleep", {"seconds": 0.9}, answers.append))
    wait_until(lambda: runtime.live_stats()["echo"].in_flight >= 1, 10, message="a call in flight")
    session.stop()  # the client went away
    lines = _lines(runtime)
    assert not answers
    assert [(r["session"], r["target"], r["outcome"]) for r in lines] == [("leaving", "sleep", "cancelled")] * 2
