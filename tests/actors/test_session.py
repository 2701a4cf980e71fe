"""The Session owns "exactly one answer": its deadline answers what a dead or crashed callee
never will, and a tell to a dead connection is an answer, not a crash (the two failures
reproduced against the real classes)."""
from __future__ import annotations

import time

import gevent
import pykka
import pytest

from actors.settings import config
from actors.upstream.connection import Connection
from actors.messages import ClientMessage, ServerRequest, ServerRequestCancelled
from actors.runtime import Runtime
from actors.downstream.client_view import ClientView
from actors.downstream.session import DEADLINE_MARGIN, Session
from tests.support import PYTHON, ROOT, wait_until

TIMEOUT = 1.0  # the echo server's per-request timeout in these tests


class _Poison:
    """Makes the connection crash a moment after it starts handling it."""


class _Boom(Exception):
    pass


@pytest.fixture
def runtime():
    cfg = config.from_data({"servers": [{"name": "echo", "timeout": TIMEOUT, "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", "tests.servers.echo"], "work_dir": str(ROOT)}},
        "restart": {"min_backoff": 0.05, "max_backoff": 0.1}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.connection("echo") is not None, 15, message="echo ready")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _session(rt):
    answers: list = []
    session = Session.start(rt, notify=None, key="test", mode="flat")
    return session, answers


def test_a_forward_queued_behind_a_crash_is_answered_by_the_sessions_deadline(runtime, monkeypatch):
    original = Connection.on_receive

    def on_receive(self, message):
        if isinstance(message, _Poison):
            # crash only once the Forward is queued behind this message (bounded wait)
            deadline = time.monotonic() + 5
            while self.actor_inbox.empty() and time.monotonic() < deadline:
                gevent.sleep(0.005)
            raise _Boom("connection bug")
        return original(self, message)
    monkeypatch.setattr(Connection, "on_receive", on_receive)
    session, answers = _session(runtime)
    conn = runtime.connection("echo")
    conn.tell(_Poison())
    began = time.monotonic()
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                "params": {"name": "echo__echo", "arguments": {"text": "hi"}}}, answers.append))
    wait_until(lambda: answers, TIMEOUT + DEADLINE_MARGIN + 5, message="the one answer")
    waited = time.monotonic() - began
    assert len(answers) == 1 and answers[0]["id"] == 7
    text = answers[0]["result"]["content"][0]["text"] if "result" in answers[0] else answers[0]["error"]["message"]
    assert "echo" in text
    assert waited < TIMEOUT + DEADLINE_MARGIN + 2
    # the crashed connection is replaced and the session still works
    wait_until(lambda: runtime.connection("echo") not in (None, conn), 15, message="echo restarted")
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                "params": {"name": "echo__echo", "arguments": {"text": "again"}}}, answers.append))
    wait_until(lambda: len(answers) == 2, 10, message="second answer")
    assert answers[1]["result"]["content"][0]["text"] == "again"
    session.stop()


def test_a_retry_to_a_connection_that_just_died_is_answered_and_the_session_lives(runtime, monkeypatch):
    dead = runtime.connection("echo")
    dead.stop()  # the supervisor may not have heard yet: the session still finds this ref
    successor = Session.start(runtime, key="stopped-too")  # a "new" connection that is no better
    successor.stop()
    looked_up: list = []

    def connection_or_status(server, *_):  # the first lookup finds the dead one, the retry's the successor
        looked_up.append(server)
        return (dead if len(looked_up) == 1 else successor), ""
    monkeypatch.setattr(runtime, "connection_or_status", connection_or_status)
    monkeypatch.setattr(ClientView, "resource_owner", lambda self, uri: ("echo", uri))
    session, answers = _session(runtime)  # after the patches: its context binds the runtime's functions
    # an idempotent read: sent, its link lost, waited for in the call table, sent once more: lost again
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "x:y"}},
                               answers.append))
    wait_until(lambda: answers, 5, message="an answer for the retry")
    assert answers[0]["id"] == 3 and "went away" in answers[0]["error"]["message"]
    assert session.is_alive() and len(answers) == 1
    session.stop()


def test_a_server_request_reaches_the_client_and_is_answered_once_even_when_the_client_leaves(runtime):
    told: list = []  # the client's stream for unsolicited messages
    session = Session.start(runtime, notify=told.append, key="relay", mode="flat")
    answers: list = []
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}}}, answers.append))
    replies: list = []
    session.tell(ServerRequest("echo", 9, "sampling/createMessage", {"messages": []}, replies.append))
    wait_until(lambda: told, 5, message="the request relayed to the client")
    our_id = told[0]["id"]
    assert told[0]["method"] == "sampling/createMessage" and our_id != 9
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": our_id, "result": {"role": "assistant"}}, answers.append))
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": our_id, "result": {"again": True}}, answers.append))
    wait_until(lambda: replies, 5, message="the answer routed back")
    # a withdrawn request: forgotten, the client told; one left open when the client goes away
    session.tell(ServerRequest("echo", 10, "sampling/createMessage", {}, replies.append))
    session.tell(ServerRequestCancelled("echo", 10))
    wait_until(lambda: len(told) == 3, 5, message="the cancellation told to the client")
    assert told[2] == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": told[1]["id"]}}
    session.tell(ServerRequest("echo", 11, "sampling/createMessage", {}, replies.append))
    wait_until(lambda: len(told) == 4, 5, message="the last request relayed")
    session.stop()
    assert replies[0] == {"role": "assistant"}
    assert len(replies) == 2 and "went away" in replies[1].message
    assert [a["id"] for a in answers] == [1]  # the client's responses themselves get no answer
