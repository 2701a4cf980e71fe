from gevent import monkey
monkey.patch_all()
# Passive registration: top confidence, persisted in SQLite across restarts, kept by every later cycle.

import json  # noqa: E402

import pykka  # noqa: E402
import pytest  # noqa: E402

from actors.events.bus import BusClient, EventBus  # noqa: E402
from actors.discovery import engine as engine_mod  # noqa: E402
from actors.discovery.messages import (GetDiscoveryStatus, ListServices, RegisterServer,  # noqa: E402
                                       RunDiscovery, UnregisterServer)
from tests.support import wait_until  # noqa: E402
from tests.unit.test_discovery_fixtures import FS_ARGS, build_tree, write_json  # noqa: E402

ASK_TIMEOUT = 20.0
SECRET = "registered-secret-789"


def ask(ref, message_class, *args, timeout=ASK_TIMEOUT):
    reply = pykka.ThreadingFuture()
    ref.tell(message_class(*args, reply))
    return reply.get(timeout=timeout)


def by_name(services) -> dict:
    return {s["name"]: s for s in services}


@pytest.fixture
def tree(tmp_path):
    yield build_tree(tmp_path)
    pykka.ActorRegistry.stop_all()


def start(tree, changes=None, **extra):
    settings = {"path_probe": {"enabled": False}, "interval": 0, "watch_interval": 0.1,
                "health": {"enabled": False}, **extra}
    bus = BusClient(EventBus.start())
    sink = changes.append if changes is not None else (lambda change: None)
    return engine_mod.start(settings, bus, sink, home=str(tree.home), project_root=str(tree.project),
                            reserved_names=frozenset({"main-one"}))


def stop_all():
    # stop in parallel with a bound, as troupe does, then check nothing is left
    for ref in pykka.ActorRegistry.get_all():
        ref.stop(block=False)
    wait_until(lambda: not pykka.ActorRegistry.get_all(), timeout=15, message="every actor to stop")


def test_registration_survives_a_restart_with_the_sqlite_store(tree, tmp_path):
    db = tmp_path / "services.db"
    engine = start(tree, store="sqlite", store_path=str(db))
    ask(engine, RunDiscovery)
    entry = {"name": "mine", "command": "my-server", "args": ["--port", "0"], "env": {"KEY": SECRET},
             "tags": ["team-a"]}
    out = ask(engine, RegisterServer, entry)
    assert out["name"] == "mine" and out["registered"] and out["confidence"] == 1.0
    assert out["env_names"] == ["KEY"] and SECRET not in json.dumps(out) and "team-a" in out["tags"]
    stop_all()

    changes = []
    engine = start(tree, changes, store="sqlite", store_path=str(db))
    ask(engine, RunDiscovery)
    got = by_name(ask(engine, ListServices))
    assert got["mine"]["registered"] and got["mine"]["args"] == ["--port", "0"]
    mine = next(c for ch in changes for c in ch.added if c.name == "mine")
    assert dict(mine.stdio.env) == {"KEY": SECRET} and mine.auto_start and mine.source == "discovery:registered"
    # a later cycle, even after every client file is gone, never removes it
    for f in (tree.home / ".claude.json", tree.project / ".mcp.json"):
        f.unlink()
    ask(engine, RunDiscovery)
    assert "mine" in by_name(ask(engine, ListServices))
    assert ask(engine, GetDiscoveryStatus)["registered"] == 1


def test_registration_merges_with_a_discovered_server_and_wins(tree):
    changes = []
    engine = start(tree, changes)
    ask(engine, RunDiscovery)
    out = ask(engine, RegisterServer, {"name": "files", "command": "npx",
                                       "args": ["@modelcontextprotocol/server-filesystem@latest", "/tmp/data"]})
    assert out["name"] == "files" and out["confidence"] == 1.0
    assert out["sources"][0]["provider"] == "registered"
    assert {s["provider"] for s in out["sources"]} == {"registered", "claude_code", "claude_desktop"}
    assert out["args"] == ["@modelcontextprotocol/server-filesystem@latest", "/tmp/data"]
    # the discovered name gave way to the registered one
    assert "filesystem-2" in changes[-1].removed and [c.name for c in changes[-1].added] == ["files"]
    # the same server registered again under another name is renamed, not duplicated
    ask(engine, RegisterServer, {"name": "files2", "command": "npx", "args": FS_ARGS})
    names = set(by_name(ask(engine, ListServices)))
    assert "files2" in names and "files" not in names


def test_unregister(tree):
    engine = start(tree)
    ask(engine, RunDiscovery)
    ask(engine, RegisterServer, {"name": "remote-api", "url": "https://example.com/mcp", "type": "http",
                                 "headers": {"Authorization": SECRET}})
    assert by_name(ask(engine, ListServices))["remote-api"]["header_names"] == ["Authorization"]
    assert ask(engine, UnregisterServer, "remote-api") is True
    assert ask(engine, UnregisterServer, "remote-api") is False
    assert ask(engine, UnregisterServer, "linter") is False  # discovered, not registered
    assert "remote-api" not in by_name(ask(engine, ListServices))


@pytest.mark.parametrize("entry,problem", [
    ({"name": "bad name!", "command": "x"}, "must match"),
    ({"name": "main-one", "command": "x"}, "main config"),
    ({"name": "nocmd"}, "needs `command`"),
    ({"name": "t", "command": "x", "tags": "one"}, "tags"),
    ({"name": "k", "command": "x", "secret_sauce": 1}, "unknown key"),
    (["not", "a", "mapping"], "mapping"),
])
def test_invalid_registrations_fail_clearly(tree, entry, problem):
    engine = start(tree)
    with pytest.raises(ValueError, match=problem):
        ask(engine, RegisterServer, entry)


def test_registrations_are_served_with_discovery_disabled(tree):
    engine = start(tree, enabled=False)
    ask(engine, RegisterServer, {"name": "solo", "command": "solo-server"})
    report = ask(engine, RunDiscovery)
    assert [s["name"] for s in report.services] == ["solo"] and dict(report.per_source) == {}


def test_discovery_does_not_rename_a_registered_server_on_clash(tree):
    engine = start(tree)
    ask(engine, RunDiscovery)
    ask(engine, RegisterServer, {"name": "linter", "command": "other-linter"})
    got = by_name(ask(engine, ListServices))
    assert got["linter"]["registered"] and got["linter-2"]["command"] == "uvx"
    write_json(tree.home / ".cursor" / "mcp.json", {"mcpServers": {"linter": {"command": "third-linter"}}})
    ask(engine, RunDiscovery)
    got = by_name(ask(engine, ListServices))
    assert got["linter"]["command"] == "other-linter" and got["linter-3"]["command"] == "third-linter"
