"""A Connection's opening, in process with scripted transports: the probe's verdicts, the
respawn of a stdio server that exits on the probe, the stdio probe's timeout, the re-probe when
initialize is refused as modern, and the era the Supervisor remembers across a restart."""
from __future__ import annotations

import gevent
import pykka
import pytest

from actors.catalogue.registry import Registry
from actors.catalogue.snapshot import Catalogue
from actors.published import Published
from actors.events.bus import BusClient, EventBus
from actors.protocol import mcp, modern_client
from actors.settings.config import ServerConfig, StdioSpec
from actors.supervision.directory import Directory
from actors.supervision.policy import Policy
from actors.supervision.supervisor import Supervisor
from actors.upstream import opening
from tests.support import wait_until

FAST = Policy(intensity=5, period=60.0, min_backoff=0.01, max_backoff=0.02, jitter=0.0, cooldown=60.0)
LEGACY_INIT = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "l"}}
DISCOVERED = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "tasks": {}},
              "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m"}}}
TOOLS = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}


class Scripted:
    """A transport whose server behaves as `Scripted.behaviour` says: "legacy" (-32601 to
    discover), "modern", "modern-only" (refuses initialize), "exit" (dies on a first request that
    is not initialize), "silent" (ignores discover). Every message sent is kept in `log`."""

    behaviour = "legacy"
    log: list = []
    opened: list = []

    def __init__(self, config, on_message, on_closed):
        self.on_message, self.on_closed = on_message, on_closed
        self.initialized = False
        Scripted.opened.append(self)

    def open(self) -> None:
        pass

    def _answer(self, rid, result=None, error=None) -> None:
        msg = {"jsonrpc": "2.0", "id": rid, **({"error": error} if error else {"result": result})}
        gevent.spawn(self.on_message, msg)

    def send(self, message: dict) -> None:
        Scripted.log.append(message)
        method, rid, kind = message.get("method"), message.get("id"), Scripted.behaviour
        if rid is None:
            return
        if method == "initialize":
            if kind in ("modern", "modern-only"):
                self._answer(rid, error={"code": -32022, "message": "unsupported",
                                         "data": {"supported": ["2026-07-28"], "requested": "2025-11-25"}})
            else:
                self.initialized = True
                self._answer(rid, LEGACY_INIT)
        elif not self.initialized and kind == "exit":
            gevent.spawn(self.on_closed, "exited with code 2")
        elif method == "server/discover":
            if kind in ("modern", "modern-only"):
                self._answer(rid, DISCOVERED)
            elif kind != "silent":
                self._answer(rid, error={"code": -32601, "message": "method not found"})
        elif method == "subscriptions/listen":
            pass  # stays open
        else:
            self._answer(rid, TOOLS if method == "tools/list" else {})

    def set_protocol_version(self, version: str) -> None:
        pass

    def close(self) -> None:
        pass

    def describe(self) -> dict:
        return {"pid": 1}


@pytest.fixture
def start():
    Scripted.log, Scripted.opened = [], []

    def run(behaviour: str, client_capabilities: dict | None = None):
        Scripted.behaviour = behaviour
        bus = BusClient(EventBus.start())
        registry = Registry.start(Published.create(Catalogue())[1], bus)
        directory, writer = Published.create(Directory())
        supervisor = Supervisor.start([ServerConfig("s", "stdio", stdio=StdioSpec("never-run"))], registry, bus,
                                      policy=FAST, transport_factory=Scripted, directory=writer,
                                      client_capabilities=client_capabilities)
        wait_until(lambda: (v := directory.current.get("s")) is not None and v.state == "ready", 10, message="ready")
        return supervisor, directory
    yield run
    pykka.ActorRegistry.stop_all()


def methods() -> list:
    return [m.get("method") for m in Scripted.log if "id" in m]


def status(supervisor) -> dict:
    from actors.messages import GetStatus
    future = pykka.ThreadingFuture()
    supervisor.tell(GetStatus(future))
    return next(s for s in future.get(timeout=5).servers if s["name"] == "s")


def restart(supervisor, directory) -> None:
    from actors.messages import ControlServer
    future = pykka.ThreadingFuture()
    supervisor.tell(ControlServer("restart", "s", future))
    future.get(timeout=5)
    wait_until(lambda: directory.current.get("s").generation == 2 and directory.current.get("s").state == "ready",
               10, message="restarted")


def test_legacy_server_gets_initialize_after_the_probe(start):
    supervisor, directory = start("legacy")
    assert methods()[:2] == ["server/discover", "initialize"]
    assert "_meta" not in Scripted.log[1]["params"]  # the legacy path is today's, unchanged
    assert status(supervisor)["era"] == "legacy"
    Scripted.log.clear()
    restart(supervisor, directory)
    assert methods()[0] == "initialize"  # remembered: no second probe


def test_modern_server_gets_the_envelope_and_no_handshake(start):
    supervisor, directory = start("modern")
    assert "initialize" not in methods() and "ping" not in methods()
    assert not any(m.get("method") == "notifications/initialized" for m in Scripted.log)
    listing = next(m for m in Scripted.log if m.get("method") == "tools/list")
    assert listing["params"]["_meta"][modern_client.META_VERSION] == "2026-07-28"
    assert listing["params"]["_meta"][modern_client.META_CAPABILITIES] == {}
    assert status(supervisor)["era"] == "modern" and status(supervisor)["server_info"] == {"name": "m"}
    Scripted.log.clear()
    restart(supervisor, directory)
    assert methods()[0] == "server/discover" and "initialize" not in methods()


def test_both_eras_hear_everything_troupe_relays_in_troupes_own_requests(start):
    """What a Runtime declares (mcp.relayed_client_capabilities): in a legacy server's initialize,
    and in the envelope of troupe's own modern requests (its listings), whoever the clients are."""
    relayed = mcp.relayed_client_capabilities()
    start("legacy", relayed)
    opening = next(m for m in Scripted.log if m.get("method") == "initialize")
    assert opening["params"]["capabilities"] == relayed
    pykka.ActorRegistry.stop_all()
    Scripted.log = []
    start("modern", relayed)
    listing = next(m for m in Scripted.log if m.get("method") == "tools/list")
    assert listing["params"]["_meta"][modern_client.META_CAPABILITIES] == relayed
    probe = next(m for m in Scripted.log if m.get("method") == "server/discover")
    assert probe["params"]["_meta"][modern_client.META_CAPABILITIES] == relayed


def test_server_that_exits_on_the_probe_is_respawned_as_legacy(start):
    supervisor, _ = start("exit")
    assert len(Scripted.opened) == 2 and methods() == ["server/discover", "initialize", "tools/list"]
    assert status(supervisor)["restarts"] == 0 and status(supervisor)["era"] == "legacy"


def test_silent_probe_on_stdio_times_out_to_legacy(start, monkeypatch):
    monkeypatch.setattr(opening, "PROBE_TIMEOUT", 0.2)
    supervisor, _ = start("silent")
    assert methods()[:2] == ["server/discover", "initialize"]
    assert any(m.get("method") == "notifications/cancelled" for m in Scripted.log)
    assert status(supervisor)["era"] == "legacy"


def test_initialize_refused_as_modern_probes_again(start, monkeypatch):
    monkeypatch.setattr(opening, "PROBE_TIMEOUT", 0.2)
    Scripted.behaviour = "modern"

    original = Scripted.send

    def slow_first_probe(self, message):  # the first discover goes unanswered, like a slow starter
        if message.get("method") == "server/discover" and not any(
                m.get("method") == "server/discover" for m in Scripted.log):
            Scripted.log.append(message)
            return
        original(self, message)
    monkeypatch.setattr(Scripted, "send", slow_first_probe)
    supervisor, _ = start("modern")
    assert methods()[:3] == ["server/discover", "initialize", "server/discover"]
    assert status(supervisor)["era"] == "modern"
