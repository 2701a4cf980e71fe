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


def _echo_runtime(**server) -> Runtime:
    cfg = config.from_data({"servers": [{"name": "echo", "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", "tests.servers.echo"], "work_dir": str(ROOT)}},
        "restart": {"min_backoff": 0.05, "max_backoff": 0.1}, **server}], "discovery": {"enabled": False}})
    return Runtime(cfg).start()


@pytest.fixture
def runtime():
    rt = _echo_runtime()
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


@pytest.fixture
def one_at_a_time():
    rt = _echo_runtime(max_in_flight=1)
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _ready_echo(rt: Runtime):
    wait_until(lambda: (e := rt.servers.current.get("echo")) is not None and e.state == "ready", 15,
               message="ready")
    return rt.servers.current.get("echo").ref


def _in_flight(rt: Runtime) -> int:
    return next(s for s in rt.status()["servers"] if s["name"] == "echo")["in_flight"]


SLEEP = {"name": "sleep", "arguments": {"seconds": 30}}


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


def test_an_answer_queued_behind_a_stop_settles_its_call(runtime):
    """The transport's verdict on a call (here: its POST was refused, so it never left troupe)
    that reached the mailbox behind the Connection's stop is the call's answer, not "connection
    stopped": read as lost with the call out, it would count as a call that may have run."""
    from actors.messages import Forward
    from actors.tells import tell
    from actors.transports.base import LinkFailure
    ref = _ready_echo(runtime)
    answers = []
    assert tell(ref, Forward("tools/call", SLEEP, answers.append))
    wait_until(lambda: _in_flight(runtime) == 1, 10, message="the call in flight")
    rid = next(rid for rid, p in ref._actor_weakref().requests._pending.items() if p.counted)
    ref.stop(block=False)  # queued, then the verdict behind it: the actor has not run since
    assert tell(ref, Inbound(LinkFailure(rid, "echo: POST refused", sent=False)))
    wait_until(lambda: answers, 10, message="the call answered")
    assert len(answers) == 1 and answers[0].link == "unsent" and "POST refused" in answers[0].message, answers


def test_calls_waiting_for_a_slot_are_answered_as_unsent_when_the_connection_stops(one_at_a_time):
    """A call held back by max_in_flight never left troupe: a stop answers it as unsent (safe to
    send elsewhere), while the call out at the server is lost with it (it may have run)."""
    from actors.messages import Forward
    from actors.tells import tell
    ref = _ready_echo(one_at_a_time)
    out, waiting = [], []
    assert tell(ref, Forward("tools/call", SLEEP, out.append))
    assert tell(ref, Forward("tools/call", SLEEP, waiting.append))
    wait_until(lambda: _in_flight(one_at_a_time) == 1 and ref._actor_weakref().waiting, 10, message="one out, one waiting")
    ref.stop(block=False)
    wait_until(lambda: out and waiting, 10, message="both answered")
    assert waiting[0].link == "unsent" and "before the call was sent" in waiting[0].message, waiting
    assert out[0].link_lost and out[0].link == "" and "connection stopped" in out[0].message, out
