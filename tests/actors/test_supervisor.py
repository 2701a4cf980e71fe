"""The Supervisor through its transport_factory: no process, a scripted transport. Ready,
restart with backoff after a crash, the circuit after a crash loop, and the directory
snapshot it publishes at each step."""
from __future__ import annotations

import gevent
import pykka
import pytest

from actors.events.bus import BusClient, EventBus
from actors.messages import ConnectionCounts, GetStatus
from actors.settings.config import ServerConfig, StdioSpec
from actors.supervision.directory import Directory
from actors.supervision.policy import Policy
from actors.catalogue.registry import Registry
from actors.catalogue.snapshot import Catalogue
from actors.published import Published
from actors.supervision.supervisor import Supervisor
from tests.support import wait_until

FAST = Policy(intensity=2, period=60.0, min_backoff=0.01, max_backoff=0.02, jitter=0.0, cooldown=60.0)


class ScriptedTransport:
    """Answers initialize and the tools list at once; `crash()` closes it like a dying server."""

    opened: list = []

    def __init__(self, config, on_message, on_closed):
        self.on_message, self.on_closed = on_message, on_closed
        ScriptedTransport.opened.append(self)

    def open(self) -> None:
        pass

    def send(self, message: dict) -> None:
        method, rid = message.get("method"), message.get("id")
        if rid is None:
            return
        result = {"initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                 "serverInfo": {"name": "scripted", "version": "1"}},
                  "tools/list": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}.get(method, {})
        gevent.spawn(self.on_message, {"jsonrpc": "2.0", "id": rid, "result": result})

    def set_protocol_version(self, version: str) -> None:
        pass

    def close(self) -> None:
        pass

    def describe(self) -> dict:
        return {"pid": 4242}

    def crash(self) -> None:
        gevent.spawn(self.on_closed, "exited with code 1")


@pytest.fixture
def started():
    ScriptedTransport.opened = []
    bus = BusClient(EventBus.start())
    registry = Registry.start(Published.create(Catalogue())[1], bus)
    directory, writer = Published.create(Directory())
    supervisor = Supervisor.start([ServerConfig("s", "stdio", stdio=StdioSpec("never-run"))], registry, bus,
                                  policy=FAST, transport_factory=ScriptedTransport, directory=writer)
    yield supervisor, directory
    pykka.ActorRegistry.stop_all()


def view(directory):
    return directory.current.get("s")


def test_ready_restart_with_backoff_then_the_circuit(started):
    _, directory = started
    wait_until(lambda: view(directory) is not None and view(directory).state == "ready", 5, message="ready")
    first = view(directory)
    assert first.counts == (1, 0, 0) and first.callable and first.generation == 1
    ScriptedTransport.opened[-1].crash()
    wait_until(lambda: view(directory).generation == 2 and view(directory).state == "ready", 5,
               message="restarted after backoff")
    assert directory.current.version > 1  # a new snapshot for every change, never an edit in place
    for generation in (2, 3):  # more than `intensity` failures within `period`: the circuit opens
        wait_until(lambda g=generation: view(directory).generation == g and view(directory).state == "ready", 5,
                   message=f"generation {generation} ready")
        ScriptedTransport.opened[-1].crash()
    wait_until(lambda: view(directory).state == "failed", 5, message="circuit open")
    assert "circuit open" in view(directory).reason and view(directory).ref is None


def test_a_burst_from_connections_is_published_once_and_an_ask_after_it_sees_it(started):
    # Connections that come up together tell their news together: one Directory for the burst,
    # not one per message (each holds a view of every server), and nothing told is lost.
    supervisor, directory = started
    wait_until(lambda: view(directory) is not None and view(directory).state == "ready", 5, message="ready")
    generation, before = view(directory).generation, directory.current.version
    for n in range(1, 51):  # told without yielding: all 50 wait in the mailbox together
        supervisor.tell(ConnectionCounts("s", generation, n, 0, 0))
    reply = pykka.ThreadingFuture()
    supervisor.tell(GetStatus(reply))  # a status read after the burst: published by the time it is answered
    assert reply.get(timeout=5) is not None
    assert view(directory).counts == (50, 0, 0)
    assert directory.current.version - before == 1
