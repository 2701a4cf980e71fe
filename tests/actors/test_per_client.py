"""`share: per_client` against the real Supervisor and a real stdio server: a call for a client
with no upstream yet waits in the Supervisor for its start, a cancel there means no answer, an
upstream whose client dies without a word is swept, and an operator's stop ends them all."""
from __future__ import annotations

import pykka
import pytest

from actors.messages import CancelForward, Forward, UpstreamError
from actors.runtime import Runtime
from actors.settings import config
from actors.supervision.client_route import ClientRoute
from actors.supervision.per_client import SWEEP_EVERY
from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import pid_alive


class _Client(pykka.ThreadingActor):
    """Stands for a Session: an actor whose ref owns an upstream; it never says it leaves."""


@pytest.fixture
def runtime():
    cfg = config.from_data({"servers": [{"name": "asker", "share": "per_client", "transport": {
        "type": "stdio", "stdio": {"command": PYTHON, "args": ["-m", "tests.servers.asker", "--start-delay", "0.3"],
                                   "work_dir": str(ROOT)}}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.connection("asker") is not None, 15, message="asker's own connection ready")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _call(rt, client, answers: list, tool: str = "whoami", token: int = 1):
    ref, why = rt.connection_or_status("asker", client)
    assert ref is not None, why
    ref.tell(Forward("tools/call", {"name": tool, "arguments": {}}, answers.append, origin=client,
                     origin_request=token))
    return ref


def _mine(rt, client):
    return rt.servers.current.clients.get(("asker", client.actor_urn))


def test_the_first_call_waits_in_the_supervisor_and_later_ones_go_straight_to_the_upstream(runtime):
    client, answers = _Client.start(), []
    assert isinstance(_call(runtime, client, answers), ClientRoute)  # nothing of this client's yet
    wait_until(lambda: answers, 15, message="the first call's answer")
    pid = int(answers[0]["content"][0]["text"])
    assert pid != runtime.status()["servers"][0]["pid"]  # not the server's own (listing) process
    mine = wait_until(lambda: _mine(runtime, client), 5, message="its upstream in the directory")
    assert _call(runtime, client, answers, token=2) is mine.ref  # no Supervisor hop any more
    wait_until(lambda: len(answers) == 2, 10, message="the second answer")
    assert answers[1]["content"][0]["text"] == str(pid)
    client.stop()


def test_a_call_cancelled_while_its_upstream_starts_gets_no_answer(runtime):
    client, answers = _Client.start(), []
    route = _call(runtime, client, answers, tool="slow", token=5)
    route.tell(CancelForward(client, 5, "cancelled by client"))
    wait_until(lambda: (m := _mine(runtime, client)) is not None and m.callable, 15, message="its upstream ready")
    _call(runtime, client, answers, token=6)  # sent after the cancel: answered, and alone
    wait_until(lambda: answers, 10, message="the later call's answer")
    assert len(answers) == 1 and answers[0]["content"][0]["text"].isdigit()
    client.stop()


def test_an_upstream_whose_client_died_without_a_word_is_swept(runtime):
    client, answers = _Client.start(), []
    _call(runtime, client, answers)
    wait_until(lambda: answers, 15, message="the answer")
    pid = int(answers[0]["content"][0]["text"])
    client.stop()  # no ClientLeft: only the sweep can notice
    wait_until(lambda: not pid_alive(pid), SWEEP_EVERY + 5, 0.05, message="the orphan's process to exit")
    wait_until(lambda: not runtime.servers.current.clients, 5, message="the directory to forget it")


def test_stopping_the_server_stops_every_clients_upstream_and_refuses_new_ones(runtime):
    clients = [_Client.start() for _ in range(2)]
    answers: list = []
    for i, client in enumerate(clients):
        _call(runtime, client, answers, token=i)
    wait_until(lambda: len(answers) == 2, 15, message="both answers")
    pids = [int(a["content"][0]["text"]) for a in answers]
    assert len(set(pids)) == 2
    assert runtime.status()["servers"][0]["per_client"]["count"] == 2
    runtime.control("stop", "asker")
    wait_until(lambda: not any(pid_alive(p) for p in pids), 5, 0.05, message="both processes to exit")
    ref, why = runtime.connection_or_status("asker", clients[0])
    assert ref is None and "stopped" in why
    late: list = []
    ClientRoute(runtime.supervisor, "asker", clients[0].actor_urn).tell(
        Forward("tools/call", {"name": "whoami", "arguments": {}}, late.append, origin=clients[0]))
    wait_until(lambda: late, 5, message="the refusal")  # a route already held is answered, never started
    assert isinstance(late[0], UpstreamError) and "stopped" in late[0].message
    assert runtime.status()["servers"][0]["per_client"]["count"] == 0
    for client in clients:
        client.stop()
