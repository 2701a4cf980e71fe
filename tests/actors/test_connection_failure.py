"""A bug inside a Connection actor: pending calls answered, the server restarted, nothing hangs."""
from __future__ import annotations

import pykka
import pytest

from actors.settings import config
from actors.upstream.connection import Connection
from actors.messages import Inbound
from actors.runtime import Runtime
from tests.support import PYTHON, ROOT, wait_until


class _Boom(Exception):
    pass


@pytest.fixture
def runtime():
    cfg = config.from_data({"servers": [{"name": "echo", "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", "tests.servers.echo"], "work_dir": str(ROOT)}},
        "restart": {"min_backoff": 0.05, "max_backoff": 0.1}}], "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def test_crash_in_connection_fails_pending_and_restarts(runtime, monkeypatch):
    def echo():
        return runtime.servers.current.get("echo")

    def status():
        return next(s for s in runtime.status()["servers"] if s["name"] == "echo")
    wait_until(lambda: echo() is not None and echo().state == "ready", 15, message="ready")
    first_ref, first_pid = echo().ref, status()["pid"]
    answers = []
    from actors.messages import Forward
    first_ref.tell(Forward("tools/call", {"name": "sleep", "arguments": {"seconds": 30}}, answers.append))
    wait_until(lambda: status()["in_flight"] == 1, 10, message="call in flight")

    original = Connection._inbound

    def explode(self, msg):
        if msg == "boom":
            raise _Boom("a bug")
        return original(self, msg)
    monkeypatch.setattr(Connection, "_inbound", explode)
    first_ref.tell(Inbound("boom"))
    wait_until(lambda: answers, 5, message="pending call answered")
    assert "internal error" in answers[0].message and answers[0].server == "echo"
    wait_until(lambda: echo().state == "ready" and echo().ref is not first_ref, 15, message="restarted")
    assert status()["restarts"] >= 1 and status()["pid"] != first_pid


def test_a_call_queued_behind_a_stop_is_answered_as_unsent(runtime):
    """A Forward told to a Connection whose stop is already in its mailbox would be dropped
    unread by pykka; it never left troupe, so it is answered as unsent (safe to send elsewhere)."""
    from actors.messages import Forward
    from actors.tells import tell
    wait_until(lambda: (e := runtime.servers.current.get("echo")) is not None and e.state == "ready", 15,
               message="ready")
    ref = runtime.servers.current.get("echo").ref
    answers = []
    ref.stop(block=False)  # queued: the actor has not run since, so it is alive and takes the next tell
    assert tell(ref, Forward("tools/call", {"name": "echo", "arguments": {"text": "late"}}, answers.append))
    wait_until(lambda: answers, 10, message="the queued call answered")
    assert len(answers) == 1 and answers[0].link == "unsent" and answers[0].link_lost, answers
    assert "before the call was sent" in answers[0].message
