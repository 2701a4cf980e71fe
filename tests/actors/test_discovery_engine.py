from gevent import monkey
monkey.patch_all()
# DiscoveryEngine with real providers over every client's files and a temp PATH.

import json  # noqa: E402
import os  # noqa: E402

import pykka  # noqa: E402
import pytest  # noqa: E402

from actors.events.bus import BusClient, EventBus  # noqa: E402
from actors.discovery import engine as engine_mod  # noqa: E402
from actors.discovery.messages import (GetDiscoveryStatus, ListServices, RunDiscovery,  # noqa: E402
                                       ServicesChanged)
from actors.discovery.providers.base import ProviderActor  # noqa: E402
from actors.discovery.providers.files import FileProvider  # noqa: E402
from tests.support import wait_until  # noqa: E402
from tests.unit.test_discovery_fixtures import (SECRET_ENV, SECRET_HEADER, build_path, build_tree,  # noqa: E402
                                                script, write_json)

ASK_TIMEOUT = 20.0


def ask(ref, message_class, *args, timeout=ASK_TIMEOUT):
    reply = pykka.ThreadingFuture()
    ref.tell(message_class(*args, reply))
    return reply.get(timeout=timeout)


class Harness:
    """Starts engines on one bus and records what they tell their owner."""

    def __init__(self, tree):
        self.tree = tree
        self.bus = BusClient(EventBus.start())
        self.changes: list[ServicesChanged] = []

    def settings(self, **extra) -> dict:
        base = {"path_probe": {"enabled": True, "path": self.tree.path, "timeout": 2}, "interval": 0, "watch_interval": 0.1,
                "health": {"enabled": False}}
        for key, value in extra.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                base[key] = {**base[key], **value}
            else:
                base[key] = value
        return base

    def start(self, reserved=frozenset(), **extra):
        return engine_mod.start(self.settings(**extra), self.bus, self.changes.append, home=str(self.tree.home),
                                project_root=str(self.tree.project), reserved_names=reserved)

    def events(self, kind):
        return [e for e in self.bus.history(limit=500) if e.kind == kind]

    def added(self) -> dict:
        return {c.name: c for change in self.changes for c in change.added}


@pytest.fixture
def harness(tmp_path, monkeypatch):
    tree = build_tree(tmp_path)
    monkeypatch.setenv("PATH", os.pathsep.join([tree.path, os.environ["PATH"]]))
    h = Harness(tree)
    yield h
    pykka.ActorRegistry.stop_all()


def by_name(services) -> dict:
    return {s["name"]: s for s in services}


def test_first_cycle_finds_merges_and_reports(harness):
    engine = harness.start(reserved={"remote"})
    report = ask(engine, RunDiscovery)
    got = by_name(report.services)
    # the npx filesystem server: three files, one service; the project file's details (and env) win
    fs = next(s for s in got.values() if s["identity"] == "stdio:npx @modelcontextprotocol/server-filesystem /tmp/data")
    assert sorted((src["provider"], src["name"]) for src in fs["sources"]) == \
        [("claude_code", "filesystem"), ("claude_code", "fs"), ("claude_desktop", "filesystem")]
    assert fs["sources"][0]["file"].endswith("project/.mcp.json") and fs["env_names"] == ["FS_TOKEN"]
    assert fs["confidence"] == 0.85
    # same name, other identity (troupe's registry file): both kept, one suffixed
    assert {"filesystem", "filesystem-2"} <= set(got)
    # the echo binary named three ways (relative, absolute, found on PATH) is one service
    echo = next(s for s in got.values() if s["identity"] == "stdio:mcp-server-echo")
    assert {src["provider"] for src in echo["sources"]} == {"vscode", "claude_desktop", "path"}
    # one GitHub endpoint written two ways
    gh = next(s for s in got.values() if s["identity"] == "url:https://api.github.com/mcp")
    assert {src["name"] for src in gh["sources"]} == {"github", "gh"} and gh["header_names"] == ["Authorization"]
    # a reserved name is never reused; the per-project cwd is filled in
    assert "remote" not in got and got["remote-2"]["transport"] == "sse"
    assert got["notes"]["args"] == [str(harness.tree.project / "notes.js")]
    assert got["linter"]["cwd"] == "/tmp"
    assert "settings-trap" not in got  # Claude Code's settings.json holds approvals, never servers
    # PATH: the MCP-looking binary is found; the one whose help does not mention MCP is not
    assert "weather-mcp" in got and not any("quiet" in name for name in got)
    # the malformed and the oversized files are reported, not fatal
    assert any("windsurf" in e and "not valid JSON" in e for e in report.errors)
    assert any("cursor" in e and "limit" in e for e in report.errors)
    assert report.per_source["windsurf"] == 0 and report.per_source["cursor"] == 1


def test_owner_is_told_configs_with_source_and_auto_connect_policy(harness):
    engine = harness.start()
    ask(engine, RunDiscovery)
    added = harness.added()
    assert added["weather-mcp"].auto_start is False and added["weather-mcp"].source == "discovery:path"
    assert added["linter"].auto_start is True and added["linter"].source == "discovery:claude_code"
    echo = next(c for c in added.values() if c.stdio and c.stdio.command == "mcp-server-echo")
    assert echo.auto_start is True  # listed in a client config, so PATH's policy does not hold it back
    assert added["old"].enabled is False
    assert {e.service for e in harness.events("ServiceAdded")} == set(added)
    done = harness.events("DiscoveryCompleted")
    assert done and done[-1].found == len(added) and done[-1].errors


def test_path_probe_auto_connect_can_be_turned_on(harness):
    engine = harness.start(path_probe={"auto_connect": True})
    ask(engine, RunDiscovery)
    assert harness.added()["weather-mcp"].auto_start is True


def test_secrets_never_leave_the_engine(harness):
    engine = harness.start()
    report = ask(engine, RunDiscovery)
    text = json.dumps([report.to_json(), ask(engine, ListServices), ask(engine, GetDiscoveryStatus),
                       [e.to_json() for e in harness.bus.history(limit=500)]], default=str)
    assert SECRET_ENV not in text and SECRET_HEADER.split()[-1] not in text
    assert SECRET_ENV not in repr(harness.added())


def test_only_mcp_looking_binaries_ever_run_and_each_once(harness):
    engine = harness.start()
    ask(engine, RunDiscovery)
    ask(engine, RunDiscovery)  # a second cycle: the unchanged binary is not run again
    assert list(harness.tree.markers.iterdir()) == []
    # weather-mcp is on PATH three times (itself, a shadowed copy, a symlink): run once, with --help only
    assert (harness.tree.runs / "weather-mcp").read_text().splitlines() == ["--help"]
    assert harness.tree.runs_of("mcp-server-quiet") == 1


def test_help_runs_with_minimal_env_no_stdin_and_its_group_killed_on_timeout(tmp_path, monkeypatch):
    tree = build_path(tmp_path)
    monkeypatch.setenv("TROUPE_TEST_SECRET", "do-not-pass")
    report_file, pid_file = tmp_path / "env.json", tmp_path / "grandchild.pid"
    script(tree.bin / "env-mcp", f"""import json, os, sys
keys = sorted(k for k in os.environ if not k.startswith("LC_"))
json.dump({{"env": keys, "stdin": sys.stdin.read()}}, open({str(report_file)!r}, "w"))
print("an MCP server")
""")
    script(tree.bin / "mcp-server-hang", f"""import subprocess, sys, time
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({str(pid_file)!r}, "w").write(str(p.pid))
time.sleep(60)
""")
    h = Harness(tree)
    try:
        engine = h.start(path_probe={"timeout": 1.0})
        report = ask(engine, RunDiscovery)
        assert json.loads(report_file.read_text()) == {"env": ["HOME", "LANG", "PATH"], "stdin": ""}
        assert "env-mcp" in by_name(report.services) and "mcp-server-hang" not in by_name(report.services)
        grandchild = int(pid_file.read_text())
        wait_until(lambda: not _alive(grandchild), timeout=5, message="the --help grandchild to be killed")
    finally:
        pykka.ActorRegistry.stop_all()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_allowlist_admits_other_names(tmp_path):
    tree = build_path(tmp_path)
    script(tree.bin / "corp-tools", 'print("serves the Model Context Protocol")\n')
    h = Harness(tree)
    try:
        names = set(by_name(ask(h.start(path_probe={"allowlist": ["corp-tools"]}), RunDiscovery).services))
        assert "corp-tools" in names
    finally:
        pykka.ActorRegistry.stop_all()


def test_slow_provider_is_skipped_and_the_others_still_count(harness):
    script(harness.tree.bin / "mcp-server-slow", "import time\ntime.sleep(30)\n")
    engine = harness.start(deadline=1.0, path_probe={"timeout": 20})
    report = ask(engine, RunDiscovery)
    assert any(e.startswith("path: no answer within 1s") for e in report.errors)
    assert "linter" in by_name(report.services) and "weather-mcp" not in by_name(report.services)


def test_a_failing_provider_is_reported_and_the_others_still_count(harness, monkeypatch):
    real_scan = FileProvider.scan

    def scan(self):
        if self.provider == "cursor":
            raise RuntimeError("disk on fire")
        return real_scan(self)
    monkeypatch.setattr(FileProvider, "scan", scan)
    engine = harness.start()
    report = ask(engine, RunDiscovery)
    assert any("cursor" in e and "disk on fire" in e for e in report.errors)
    assert "linter" in by_name(report.services)


def test_watcher_picks_up_edits_creations_and_deletions(harness):
    engine = harness.start()
    ask(engine, RunDiscovery)
    cursor = harness.tree.home / ".cursor" / "mcp.json"
    write_json(cursor, {"mcpServers": {"gh": {"url": "https://api.github.com/mcp"},
                                       "fresh": {"command": "fresh-server"}}})
    wait_until(lambda: "fresh" in by_name(ask(engine, ListServices)), timeout=10, message="the edit to be seen")
    assert "fresh" in harness.added()
    # a broken save keeps the last good servers
    cursor.write_text('{"mcpServers": {"fresh": ')
    wait_until(lambda: any("kept 2 server" in e for e in ask(engine, GetDiscoveryStatus)["errors"]), timeout=10,
               message="the broken save to be reported")
    assert "fresh" in by_name(ask(engine, ListServices))
    cursor.unlink()
    wait_until(lambda: "fresh" not in by_name(ask(engine, ListServices)), timeout=10, message="the deletion")
    assert any("fresh" in change.removed for change in harness.changes)
    assert "fresh" in {e.service for e in harness.events("ServiceRemoved")}
    # a brand-new file in a directory that did not exist
    write_json(harness.tree.project / ".kiro" / "settings" / "mcp.json",
               {"mcpServers": {"kiro-lint": {"command": "uvx", "args": ["mcp-lint", "--lax"]}}})
    wait_until(lambda: by_name(ask(engine, ListServices)).get("kiro-lint", {}).get("args") == ["mcp-lint", "--lax"],
               timeout=10, message="the new file's server")
    # a glob location: a Continue block file appears, then is removed
    block = harness.tree.project / ".continue" / "mcpServers" / "tools.yaml"
    block.parent.mkdir(parents=True)
    block.write_text("mcpServers:\n  - name: block-tool\n    command: block-mcp\n")
    wait_until(lambda: "block-tool" in by_name(ask(engine, ListServices)), timeout=10, message="the block file")
    block.unlink()
    wait_until(lambda: "block-tool" not in by_name(ask(engine, ListServices)), timeout=10,
               message="the block file's removal")


def test_new_binary_on_path_is_found_by_watching_the_directory(harness):
    engine = harness.start()
    ask(engine, RunDiscovery)
    script(harness.tree.bin2 / "late-mcp", 'print("Model Context Protocol server")\n')
    wait_until(lambda: "late-mcp" in by_name(ask(engine, ListServices)), timeout=10, message="late-mcp")


def test_status_summarises_the_last_run(harness):
    engine = harness.start()
    ask(engine, RunDiscovery)
    status = ask(engine, GetDiscoveryStatus)
    assert status["services"] == len(ask(engine, ListServices)) and status["cycles"] >= 1
    assert status["last_run_at"] and status["duration_s"] is not None and status["store"] == "memory"
    assert status["providers"]["windsurf"]["errors"] and status["providers"]["claude_code"]["count"] == 5
    assert set(status["health"]) == {"healthy", "unhealthy", "unknown"}


def test_only_listed_providers_run(harness):
    engine = harness.start(providers=["cursor"])
    report = ask(engine, RunDiscovery)
    assert set(report.per_source) == {"cursor"}
    assert not (harness.tree.runs / "weather-mcp").exists()


def test_stopping_the_engine_stops_its_providers(harness):
    engine = harness.start()
    ask(engine, RunDiscovery)
    assert pykka.ActorRegistry.get_by_class(ProviderActor)
    engine.stop(timeout=10)
    assert pykka.ActorRegistry.get_by_class(ProviderActor) == []
