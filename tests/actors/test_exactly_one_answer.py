"""Exactly one answer, whatever happens: seeded random interleavings of calls (forwarded, slow,
core tools, reads retried after a restart), cancels, client departures and server crashes,
against real Sessions and a real upstream process. Every request of a client that stayed gets
exactly one answer, unless it was cancelled: then at most one (its answer may have been on its
way when the cancel came); a client that left gets at most one per request; no Session dies."""
from __future__ import annotations

import os
import random
import signal

import gevent
import pykka
import pytest

from actors.messages import ClientGone, ClientMessage
from actors.runtime import Runtime
from actors.settings import config
from actors.downstream.session import Session
from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import children_of

SEEDS = range(4)
STEPS = 120
ANSWERED_WITHIN_S = 30.0  # the echo server's timeout, the Session's margin, a restart: well within this


@pytest.fixture
def runtime(tmp_path):
    cfg = config.from_data({"servers": [
        {"name": "echo", "timeout": 2.0, "transport": {"type": "stdio", "stdio": {
            "command": PYTHON, "args": ["-m", "tests.servers.echo"], "work_dir": str(ROOT)}},
         "restart": {"min_backoff": 0.05, "max_backoff": 0.2, "intensity": 1000, "period": 1}},
        {"name": "flaky", "timeout": 2.0, "transport": {"type": "stdio", "stdio": {
            "command": PYTHON, "args": ["-m", "tests.servers.first_call_crashes", "--marker", str(tmp_path / "m")],
            "work_dir": str(ROOT)}}, "restart": {"min_backoff": 0.05, "max_backoff": 0.2}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.connection("echo") is not None and rt.connection("flaky") is not None, 20,
               message="servers ready")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


class Client:
    """One downstream client: its Session, what it asked, what it cancelled, what it heard."""

    def __init__(self, rt, name: str) -> None:
        self.answers: dict = {}
        self.asked: list = []
        self.cancelled: set = set()
        self.session = Session.start(rt, notify=lambda m: None, key=name, mode="flat")
        self.gone = False

    def sink(self, message) -> None:
        if isinstance(message, dict) and "method" not in message:
            self.answers.setdefault(message.get("id"), []).append(message)

    def request(self, rid, method: str, params: dict) -> None:
        self.asked.append(rid)
        self.session.tell(ClientMessage({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, self.sink))

    def cancel(self, rid) -> None:
        self.cancelled.add(rid)
        self.session.tell(ClientMessage({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                         "params": {"requestId": rid, "reason": "test"}}, self.sink))

    def leave(self) -> None:
        self.gone = True
        self.session.tell(ClientGone("test"))


def _kill_echo() -> int:
    """SIGKILL this test's own echo server (a child of this process: other suites running side by
    side have echo servers of their own); its Connection sees the pipe close and it is restarted."""
    killed = 0
    for pid in children_of(os.getpid()):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"tests.servers.echo" in cmdline:
            os.kill(pid, signal.SIGKILL)
            killed += 1
    return killed  # 0 while it is being restarted


@pytest.mark.parametrize("seed", SEEDS)
def test_every_request_gets_exactly_one_answer_or_none_after_a_cancel(runtime, seed):
    rng = random.Random(seed)
    clients = [Client(runtime, f"c{seed}-0")]
    rid, kills, killed = 0, 0, 0
    for _ in range(STEPS):
        live = [c for c in clients if not c.gone]
        if not live:
            clients.append(Client(runtime, f"c{seed}-{len(clients)}"))
            continue
        client = rng.choice(live)
        op = rng.random()
        rid += 1
        if op < 0.30:
            client.request(rid, "tools/call", {"name": "echo__echo", "arguments": {"text": str(rid)}})
        elif op < 0.50:
            client.request(rid, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": rng.random() * 0.3}})
        elif op < 0.58:
            client.request(rid, "tools/call", {"name": "core_status", "arguments": {}})
        elif op < 0.64:
            client.request(rid, "resources/read", {"uri": "flaky://doc"})
        elif op < 0.82 and client.asked:
            client.cancel(rng.choice(client.asked))
        elif op < 0.88:
            client.leave()
            clients.append(Client(runtime, f"c{seed}-{len(clients)}"))
        elif op < 0.92:
            kills += 1
            killed += _kill_echo()
        else:
            client.request(rid, "tools/call", {"name": "no_such_tool", "arguments": {}})
        if rng.random() < 0.3:
            gevent.sleep(rng.random() * 0.05)  # let some of it happen before the next step

    assert kills == 0 or killed > 0  # the crashes really happened

    def settled() -> bool:
        return all(rid in c.answers or rid in c.cancelled for c in clients if not c.gone for rid in c.asked)
    wait_until(settled, ANSWERED_WITHIN_S, message="every request of every client that stayed answered")
    for c in clients:
        for asked in c.asked:
            count = len(c.answers.get(asked, ()))
            if c.gone or asked in c.cancelled:
                assert count <= 1, (asked, c.answers[asked])
            else:
                assert count == 1, (asked, c.answers.get(asked))
        assert c.session.is_alive() or c.gone
    for c in clients:
        if not c.gone:
            c.leave()
