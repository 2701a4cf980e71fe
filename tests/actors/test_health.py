from gevent import monkey
monkey.patch_all()
# HealthChecker and the one-shot probe: real stdio servers, transitions only, bounded concurrency.

import time  # noqa: E402

import gevent  # noqa: E402
import pykka  # noqa: E402
import pytest  # noqa: E402

from actors.events.bus import BusClient, EventBus  # noqa: E402
from actors.events.kinds import StartupSettled  # noqa: E402
from actors.settings.config import ServerConfig, StdioSpec  # noqa: E402
from actors.discovery import engine as engine_mod  # noqa: E402
from actors.discovery.messages import ListServices, RunDiscovery  # noqa: E402
from actors.discovery.probe import probe  # noqa: E402
from actors.discovery.health import CheckHealth, GetHealth, HealthChecker, SetServices  # noqa: E402
from tests.support.trust import approve_all  # noqa: E402
from tests.support import PYTHON, ROOT, wait_until  # noqa: E402
from tests.unit.test_discovery_fixtures import build_path, write_json  # noqa: E402

ASK_TIMEOUT = 20.0


def server(name: str, module: str, *args: str) -> ServerConfig:
    return ServerConfig(name=name, transport="stdio",
                        stdio=StdioSpec(PYTHON, ("-m", f"tests.servers.{module}", *args), work_dir=str(ROOT)))


ECHO = server("echo", "echo", "--tools", "3")
CRASH = server("crash", "crash_on_start")
SLOW = server("slow", "slow_start", "--delay", "30")


def ask(ref, message_class, *args, timeout=ASK_TIMEOUT):
    reply = pykka.ThreadingFuture()
    ref.tell(message_class(*args, reply))
    return reply.get(timeout=timeout)


@pytest.fixture
def bus():
    yield BusClient(EventBus.start())
    pykka.ActorRegistry.stop_all()


def health_events(bus, name=None):
    return [e for e in bus.history(limit=500) if e.kind == "HealthChanged" and (name is None or e.service == name)]


# ---------------------------------------------------------------- probe()

def test_probe_handshakes_and_counts_tools():
    ok, detail, tools = probe(ECHO, timeout=10)
    assert (ok, tools) == (True, 9) and "9 tools" in detail


def test_probe_reports_a_server_that_dies():
    ok, detail, tools = probe(CRASH, timeout=10)
    assert ok is False and "exited with code 3" in detail and tools == 0


def test_probe_gives_up_on_time_on_a_silent_server():
    started = time.monotonic()
    ok, detail, _ = probe(SLOW, timeout=1.0)
    assert ok is False and "in time" in detail
    assert time.monotonic() - started < 6  # the timeout plus the transport's bounded close


def test_probe_reports_a_missing_command():
    ok, detail, _ = probe(ServerConfig(name="x", transport="stdio", stdio=StdioSpec("/nonexistent/mcp")), 5)
    assert ok is False and "cannot start" in detail


# ---------------------------------------------------------------- the actor

def test_check_all_emits_transitions_only(bus):
    checker = HealthChecker.start(bus, interval=0, timeout=10)
    checker.tell(SetServices((ECHO, CRASH)))
    result = ask(checker, CheckHealth, None)
    assert result["echo"]["healthy"] is True and result["echo"]["tools"] == 9
    assert result["crash"]["healthy"] is False and result["crash"]["checked_at"]
    wait_until(lambda: len(health_events(bus)) == 2, message="two HealthChanged events")
    ask(checker, CheckHealth, "echo")
    ask(checker, CheckHealth, None)
    # The bus is FIFO: once a marker published now is in its history, anything the
    # checker published before answering is there too.
    bus.publish(StartupSettled())
    wait_until(lambda: any(e.kind == "StartupSettled" for e in bus.history(limit=500)), message="marker")
    assert len(health_events(bus)) == 2  # same verdicts again: no new events
    assert ask(checker, GetHealth)["crash"]["healthy"] is False


def test_unknown_service_is_a_lookup_error(bus):
    checker = HealthChecker.start(bus, interval=0)
    with pytest.raises(LookupError, match="nope"):
        ask(checker, CheckHealth, "nope")


def test_connected_services_are_healthy_without_a_probe(bus):
    calls = []
    checker = HealthChecker.start(bus, interval=0, is_connected=lambda name: name == "echo",
                                  probe=lambda cfg, timeout: calls.append(cfg.name) or (False, "down", 0))
    checker.tell(SetServices((ECHO, CRASH)))
    result = ask(checker, CheckHealth, None)
    assert result["echo"]["healthy"] is True and result["echo"]["detail"] == "connected"
    assert calls == ["crash"]


class FakeProbe:
    """Counts concurrent probes; each verdict comes from `verdicts` (flipping if asked)."""

    def __init__(self, delay=0.05, flip=False):
        self.delay, self.flip = delay, flip
        self.running = self.peak = self.calls = 0

    def __call__(self, config, timeout):
        self.running += 1
        self.calls += 1
        self.peak = max(self.peak, self.running)
        try:
            gevent.sleep(self.delay)
        finally:
            self.running -= 1
        healthy = (self.calls % 2 == 1) if self.flip else True
        return healthy, "fake", 1


def fakes(n):
    return tuple(ServerConfig(name=f"s{i}", transport="stdio", stdio=StdioSpec("true")) for i in range(n))


def test_concurrency_is_bounded(bus):
    fake = FakeProbe(delay=0.1)
    checker = HealthChecker.start(bus, interval=0, concurrency=3, probe=fake)
    checker.tell(SetServices(fakes(10)))
    result = ask(checker, CheckHealth, None)
    assert len(result) == 10 and all(r["healthy"] for r in result.values())
    assert fake.peak == 3 and fake.calls == 10


def test_schedule_probes_again_and_reports_each_transition(bus):
    fake = FakeProbe(delay=0.01, flip=True)
    HealthChecker.start(bus, interval=0.2, first_check_delay=0, probe=fake).tell(SetServices(fakes(1)))
    wait_until(lambda: len(health_events(bus, "s0")) >= 3, timeout=10, message="three transitions")
    verdicts = [e.healthy for e in health_events(bus, "s0")]
    assert verdicts[:3] == [True, False, True]


def test_removed_service_no_longer_holds_up_a_request(bus):
    fake = FakeProbe(delay=0.5)
    checker = HealthChecker.start(bus, interval=0, probe=fake)
    checker.tell(SetServices(fakes(2)))
    reply = pykka.ThreadingFuture()
    checker.tell(CheckHealth(None, reply))
    checker.tell(SetServices(fakes(1)))
    assert set(reply.get(timeout=ASK_TIMEOUT)) == {"s0"}


def test_stopping_fails_waiting_requests_and_kills_probes(bus):
    fake = FakeProbe(delay=60)
    checker = HealthChecker.start(bus, interval=0, probe=fake)
    checker.tell(SetServices(fakes(2)))
    reply = pykka.ThreadingFuture()
    checker.tell(CheckHealth(None, reply))
    wait_until(lambda: fake.running == 2, message="probes to start")
    started = time.monotonic()
    checker.stop(timeout=10)
    assert time.monotonic() - started < 5 and fake.running == 0
    with pytest.raises(RuntimeError, match="stopped"):
        reply.get(timeout=1)


def test_engine_feeds_the_checker_and_shows_health(tmp_path, monkeypatch, bus):
    tree = build_path(tmp_path)
    settings = {"path_probe": {"enabled": True, "path": tree.path}, "interval": 0, "watch": False, "providers": ["path"],
                "health": {"interval": 60, "first_check_delay": 0, "timeout": 10}}
    engine = engine_mod.start(settings, bus, lambda change: None, home=str(tree.home),
                              project_root=str(tree.project), trust_box=approve_all())
    ask(engine, RunDiscovery)

    def health():
        return {s["name"]: s["healthy"] for s in ask(engine, ListServices)}
    wait_until(lambda: None not in health().values(), timeout=20, message="every service checked")
    assert health() == {"mcp-server-echo": True, "weather-mcp": False}


def test_engine_passes_is_connected_and_spares_auto_started_servers_without_it(tmp_path, bus):
    tree = build_path(tmp_path)
    write_json(tree.home / ".cursor" / "mcp.json", {"mcpServers": {"listed": {"command": "listed-server"}}})
    settings = {"path_probe": {"enabled": True, "path": tree.path}, "interval": 0, "watch": False, "providers": ["path", "cursor"],
                "health": {"interval": 60, "first_check_delay": 0, "timeout": 10}}

    def start(**kw):
        return engine_mod.start(settings, bus, lambda change: None, home=str(tree.home),
                                project_root=str(tree.project), trust_box=approve_all(), **kw)

    engine = start(is_connected=lambda name: name == "listed")
    ask(engine, RunDiscovery)
    wait_until(lambda: by_name(ask(engine, ListServices))["listed"]["healthy"] is True, timeout=20,
               message="the connected server reported healthy")
    engine.stop(timeout=10)
    # without is_connected the engine's own checker never launches a second copy of an
    # auto-started server; it still probes the manual ones found on PATH
    engine = start()
    ask(engine, RunDiscovery)
    wait_until(lambda: by_name(ask(engine, ListServices))["weather-mcp"]["healthy"] is False, timeout=20,
               message="weather-mcp probed")
    assert by_name(ask(engine, ListServices))["listed"]["healthy"] is None
    # asked explicitly (through the engine, which forwards to its checker), it is probed
    result = ask(engine, CheckHealth, "listed")
    assert result["listed"]["healthy"] is False and "cannot start" in result["listed"]["detail"]
    assert set(ask(engine, GetHealth)) == {"listed", "mcp-server-echo", "weather-mcp"}


def test_engine_without_health_checking_says_so(tmp_path, bus):
    tree = build_path(tmp_path)
    engine = engine_mod.start({"providers": [], "health": {"enabled": False}}, bus, lambda change: None,
                              home=str(tree.home), project_root=str(tree.project))
    with pytest.raises(RuntimeError, match="health checking is off"):
        ask(engine, CheckHealth, None)


def by_name(services) -> dict:
    return {s["name"]: s for s in services}
