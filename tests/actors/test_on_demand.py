"""Servers on demand, in-process: the Supervisor, Registry and TrustKeeper with a scripted
transport (no process). The state machine: a never-listed server is started once to learn its
lists (not a wake) and stops; its listing is kept with the pins and served by the next troupe
without starting it; wakes share one start; an idle Connection stops only when nothing came in;
a call in flight keeps it up; a failing wake backs off as any server does."""
from __future__ import annotations

import time

import gevent
import pykka
import pytest

from actors.catalogue.registry import Registry
from actors.catalogue.snapshot import Catalogue
from actors.events.bus import BusClient, EventBus
from actors.messages import Forward
from actors.published import Published
from actors.settings.config import ServerConfig, StdioSpec
from actors.supervision import on_demand
from actors.supervision.demand import WakeServer
from actors.supervision.directory import Directory
from actors.supervision.policy import Policy
from actors.supervision.supervisor import Supervisor
from actors.trust.keeper import TrustKeeper
from actors.trust.ledger import TrustSnapshot
from tests.support import wait_until

FAST = Policy(intensity=2, period=60.0, min_backoff=0.05, max_backoff=0.1, jitter=0.0, cooldown=60.0)
TOOL = {"name": "t", "description": "a tool", "inputSchema": {"type": "object"}}


class Scripted:
    """Answers initialize and the lists at once; a tools/call named "hold" is never answered;
    `fail_open` makes every open fail (a server that crashes on start)."""

    opened: list = []
    fail_open = False

    def __init__(self, config, on_message, on_closed):
        self.on_message, self.on_closed, self.closed, self.held = on_message, on_closed, False, []
        Scripted.opened.append(self)

    def open(self) -> None:
        if Scripted.fail_open:
            from actors.transports.base import TransportError
            raise TransportError("exited with code 1 during start")

    def send(self, message: dict) -> None:
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            return
        if method == "tools/call" and message["params"]["name"] == "hold":
            self.held.append(rid)
            return
        result = {"initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}, "resources": {}},
                                 "serverInfo": {"name": "scripted", "version": "1"}},
                  "tools/list": {"tools": [TOOL]}, "resources/list": {"resources": []},
                  "tools/call": {"content": [{"type": "text", "text": "ok"}]}}.get(str(method), {})
        gevent.spawn(self.on_message, {"jsonrpc": "2.0", "id": rid, "result": result})

    def release(self) -> None:
        for rid in self.held:
            gevent.spawn(self.on_message, {"jsonrpc": "2.0", "id": rid,
                                           "result": {"content": [{"type": "text", "text": "ok"}]}})

    def set_protocol_version(self, version: str) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def describe(self) -> dict:
        return {"pid": 4242}


class Troupe:
    """The three actors, over one approvals file."""

    def __init__(self, path: str, config: ServerConfig) -> None:
        self.bus = BusClient(EventBus.start())
        self.trust, trust_writer = Published.create(TrustSnapshot())
        self.keeper = TrustKeeper.start(path, trust_writer, poll_interval=0)
        self.catalogue, cat_writer = Published.create(Catalogue())
        self.registry = Registry.start(cat_writer, self.bus, trust_box=self.trust, keeper=self.keeper)
        self.directory, writer = Published.create(Directory())
        self.supervisor = Supervisor.start([config], self.registry, self.bus, policy=FAST, transport_factory=Scripted,
                                           directory=writer, trust_box=self.trust)

    def view(self):
        return self.directory.current.get("s")

    def events(self, kind: str) -> list:
        return [e for e in self.bus.history(500) if e.kind == kind]

    def stop(self) -> None:
        for ref in (self.supervisor, self.registry, self.keeper, self.bus.ref):
            ref.stop()


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setattr(on_demand, "LEARN_LINGER", 0.05)
    Scripted.opened, Scripted.fail_open = [], False
    yield str(tmp_path / "approvals.json")
    pykka.ActorRegistry.stop_all()


def config(idle_stop: float = 0.3) -> ServerConfig:
    return ServerConfig("s", "stdio", stdio=StdioSpec("never-run"), start="on_demand", idle_stop=idle_stop)


def call(ref, name: str = "t") -> pykka.ThreadingFuture:
    answer = pykka.ThreadingFuture()
    ref.tell(Forward("tools/call", {"name": name, "arguments": {}}, answer.set))
    return answer


def test_learned_once_then_served_from_the_kept_listing_without_a_start(fresh):
    t = Troupe(fresh, config())
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle after learning")
    assert len(Scripted.opened) == 1  # started once, stopped after its lists
    wait_until(lambda: Scripted.opened[0].closed, 5, message="its transport closed")
    idled = t.events("ServerIdled")
    assert idled and idled[0].learned and not t.events("ServerWoken")
    assert [e.name for e in t.catalogue.current.tools] == ["s__t"]  # still served while idle
    wait_until(lambda: t.trust.current.listings, 5, message="the listing kept with the pins")
    t.stop()
    again = Troupe(fresh, config())  # a new troupe over the same approvals file
    wait_until(lambda: again.view() is not None and again.view().state == "idle", 5, message="idle at once")
    wait_until(lambda: [e.name for e in again.catalogue.current.tools] == ["s__t"], 5, message="kept tools served")
    assert len(Scripted.opened) == 1  # nothing started
    assert again.view().counts == (1, 0, 0) and again.view().ref is None


def test_wakes_share_one_start_and_idle_stop_follows(fresh):
    t = Troupe(fresh, config(idle_stop=0.3))
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle")
    for _ in range(10):
        t.supervisor.tell(WakeServer("s", "tools/call"))
    wait_until(lambda: t.view().callable, 5, message="woken")
    assert len(Scripted.opened) == 2  # the learning start, and one for ten wakes
    woken = t.events("ServerWoken")
    assert [e.wakes for e in woken] == [1]
    assert call(t.view().ref).get(timeout=5)["content"][0]["text"] == "ok"
    wait_until(lambda: t.view().state == "idle", 5, message="idle again after idle_stop")
    wait_until(lambda: Scripted.opened[-1].closed, 5, message="its transport closed")
    assert t.events("ServerIdled")[-1].learned is False


def stays(condition, seconds: float) -> None:
    """condition() holds at every look for `seconds` (a bounded poll for what must not happen)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert condition()
        gevent.sleep(0.02)


def test_a_call_in_flight_keeps_it_up_and_it_idles_after_the_answer(fresh):
    t = Troupe(fresh, config(idle_stop=0.2))
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle")
    t.supervisor.tell(WakeServer("s"))
    wait_until(lambda: t.view().callable, 5, message="woken")
    transport = Scripted.opened[-1]
    held = call(t.view().ref, "hold")  # answered only by release(): in flight until then
    stays(lambda: t.view().state == "ready", 1.0)  # five idle_stops with a call in flight: still up
    released = time.monotonic()
    transport.release()
    assert held.get(timeout=5)["content"][0]["text"] == "ok"
    wait_until(lambda: t.view().state == "idle", 5, message="idle after the answer")
    assert time.monotonic() - released >= 0.2  # idle_stop counts from the call's end


def test_a_failing_wake_backs_off_and_opens_the_circuit(fresh):
    t = Troupe(fresh, config())
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle")
    Scripted.fail_open = True
    t.supervisor.tell(WakeServer("s"))
    wait_until(lambda: t.view().state == "failed", 5, message="the circuit opened after backoffs")
    assert len(t.events("ServerRestarted")) == FAST.intensity and t.events("CircuitOpened")
    assert [e.name for e in t.catalogue.current.tools] == ["s__t"]  # its lists stay served


def test_a_call_reaching_a_connection_that_agreed_to_stop_is_answered_unsent(fresh):
    """The boundary, step by step: the Connection agrees to stop (StopIdle with its activity count),
    and a call told to it right after is answered as never sent (a Session sends it to the next start)."""
    from actors.supervision.demand import StopIdle
    t = Troupe(fresh, config(idle_stop=30))
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle")
    t.supervisor.tell(WakeServer("s"))
    wait_until(lambda: t.view().callable, 5, message="woken")
    view = t.view()
    view.ref.tell(StopIdle(view.generation, 0))  # no call reached it since it started
    late = call(view.ref)
    outcome = late.get(timeout=5)
    assert outcome.link == "unsent" and outcome.link_lost and "idleness" in outcome.message
    wait_until(lambda: t.view().state == "idle", 5, message="idle once it agreed")
    wait_until(lambda: Scripted.opened[-1].closed, 5, message="its transport closed")


def test_a_stop_proposed_before_a_call_came_in_is_refused(fresh):
    from actors.supervision.demand import StopIdle
    t = Troupe(fresh, config(idle_stop=30))
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle")
    t.supervisor.tell(WakeServer("s"))
    wait_until(lambda: t.view().callable, 5, message="woken")
    view = t.view()
    assert call(view.ref).get(timeout=5)["content"][0]["text"] == "ok"  # activity 1 now
    view.ref.tell(StopIdle(view.generation, 0))  # proposed before that call: refused
    assert call(view.ref).get(timeout=5)["content"][0]["text"] == "ok"  # still taking calls
    assert t.view().state == "ready" and not Scripted.opened[-1].closed


def test_a_tasks_request_keeps_it_up_for_task_quiet_whatever_its_idle_stop(fresh, monkeypatch):
    """A running task is a use: its polls (tasks/get) come less often than a short idle_stop, so
    after a task's request the server stays up at least TASK_QUIET."""
    from actors.upstream import idling
    monkeypatch.setattr(idling, "TASK_QUIET", 1.0)
    t = Troupe(fresh, config(idle_stop=0.2))
    wait_until(lambda: t.view() is not None and t.view().state == "idle", 5, message="idle")
    t.supervisor.tell(WakeServer("s"))
    wait_until(lambda: t.view().callable, 5, message="woken")
    polled = pykka.ThreadingFuture()
    t.view().ref.tell(Forward("tasks/get", {"taskId": "x"}, polled.set))
    polled.get(timeout=5)
    began = time.monotonic()
    stays(lambda: t.view().state == "ready", 0.6)  # three idle_stops, within TASK_QUIET
    wait_until(lambda: t.view().state == "idle", 5, message="idle once TASK_QUIET passed")
    assert time.monotonic() - began >= 0.9
