"""The PATH probe runs `--help` only from trusted absolute directories, in an empty temp cwd, and only when asked."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pykka
import pytest
import yaml

from actors.events.bus import BusClient, EventBus
from actors.discovery import engine as engine_mod
from actors.discovery.messages import RunDiscovery
from actors.discovery.providers.pathprobe import HELP_DIR_PREFIX, unsafe
from tests.support import PYTHON, ROOT
from tests.unit.test_discovery_fixtures import script, write_json

ASK_TIMEOUT = 20.0
RUN_TIMEOUT = 60.0
NAME = "mcp-server-marker"
RELATIVE = "relbin"  # resolved against the cwd, which the tests make tmp_path


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    """(a) a relative dir, (b) a world-writable dir, (c) a dir of ours 0o755, plus an empty entry;
    each holds mcp-server-marker, which records where it ran in markers/<label>."""
    monkeypatch.chdir(tmp_path)  # so the relative entry would name a real directory
    markers, home, project = tmp_path / "markers", tmp_path / "home", tmp_path / "project"
    for d in (markers, home, project):
        d.mkdir()
    dirs = {"relative": tmp_path / RELATIVE, "world": tmp_path / "world", "trusted": tmp_path / "trusted"}
    for label, directory in dirs.items():
        directory.mkdir()
        marker(directory / NAME, markers / label)
    dirs["world"].chmod(0o777)
    dirs["trusted"].chmod(0o755)
    # in the trusted directory, but the file itself is writable by its group
    marker(dirs["trusted"] / "mcp-server-groupwrite", markers / "groupwrite", mode=0o775)
    search = os.pathsep.join([RELATIVE, "", str(dirs["world"]), str(dirs["trusted"])])
    return SimpleNamespace(path=search, markers=markers, home=home, project=project, dirs=dirs, root=tmp_path)


def marker(path: Path, record: Path, mode: int = 0o755) -> Path:
    return script(path, f"""import json, os
json.dump({{"pwd": os.getcwd(), "listing": os.listdir(".")}}, open({str(record)!r}, "w"))
print("MCP server usage: stdio")
""", mode)


def ran(fake) -> list[str]:
    return sorted(p.name for p in fake.markers.iterdir())


def scan(fake, **path_probe):
    bus = BusClient(EventBus.start())
    settings = {"providers": ["path"], "path_probe": {"path": fake.path, **path_probe}, "interval": 0,
                "watch": False, "health": {"enabled": False}}
    try:
        engine = engine_mod.start(settings, bus, lambda change: None, home=str(fake.home),
                                  project_root=str(fake.project))
        reply = pykka.ThreadingFuture()
        engine.tell(RunDiscovery(reply))
        return reply.get(timeout=ASK_TIMEOUT)
    finally:
        pykka.ActorRegistry.stop_all()


def test_only_trusted_absolute_directories_are_probed_in_an_empty_temp_dir(fake_path):
    report = scan(fake_path, enabled=True)
    assert ran(fake_path) == ["trusted"]
    assert [s["name"] for s in report.services] == [NAME]
    assert report.services[0]["command"] == str(fake_path.dirs["trusted"] / NAME)
    seen = json.loads((fake_path.markers / "trusted").read_text())
    cwd = Path(seen["pwd"])
    assert seen["listing"] == [] and cwd.name.startswith(HELP_DIR_PREFIX)
    assert cwd.parent == Path(tempfile.gettempdir()).resolve() and not cwd.exists()  # removed afterwards
    assert cwd != fake_path.home and cwd != fake_path.root
    # every skip is said once, one line each, not silently
    world, trusted = fake_path.dirs["world"], fake_path.dirs["trusted"]
    assert sorted(report.errors) == sorted([
        f"path: PATH entry {RELATIVE!r} is relative; not probed",
        "path: PATH entry '' is relative; not probed",
        f"path: PATH entry {str(world)!r} is writable by others; not probed",
        f"path: {trusted / 'mcp-server-groupwrite'} is writable by its group; not probed",
    ])


def test_default_settings_probe_nothing(fake_path):
    report = scan(fake_path)
    assert ran(fake_path) == [] and report.services == () and "path" not in report.per_source


def test_unsafe_owners_and_modes():
    me = 1000

    def st(uid, mode):
        return os.stat_result((mode, 0, 0, 0, uid, 0, 0, 0, 0, 0))
    assert unsafe(st(0, 0o40755), me) is None and unsafe(st(me, 0o40755), me) is None
    assert unsafe(st(1234, 0o40755), me) == "is owned by uid 1234"
    assert unsafe(st(me, 0o41777), me) == "is writable by others"
    assert unsafe(st(0, 0o40775), me) == "is writable by its group"


def discover_cli(fake, *flags) -> subprocess.CompletedProcess:
    config = fake.root / "troupe.yaml"
    config.write_text(yaml.safe_dump({"discovery": {"path_probe": {"enabled": True}}}))
    return subprocess.run(
        [PYTHON, "-m", "actors.main", "discover", *flags, "--config", str(config), "--json",
         "--home", str(fake.home), "--project-root", str(fake.project)],
        cwd=fake.root, capture_output=True, text=True, timeout=RUN_TIMEOUT,
        env={"PATH": fake.path, "HOME": str(fake.home), "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"})


def test_discover_no_probe_executes_nothing(fake_path):
    # a client config naming the trusted marker: a health probe would launch it
    write_json(fake_path.home / ".cursor" / "mcp.json", {"mcpServers": {
        "configured": {"command": str(fake_path.dirs["trusted"] / NAME)}}})
    quiet = discover_cli(fake_path, "--no-probe")
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert ran(fake_path) == []
    doc = json.loads(quiet.stdout)
    assert doc["probed"] is False and "path" not in doc["per_source"]
    assert [s["name"] for s in doc["services"]] == ["configured"]
    # the same run without --no-probe does execute it: the markers above can see a run
    loud = discover_cli(fake_path)
    assert loud.returncode == 0, loud.stderr[-2000:]
    assert ran(fake_path) == ["trusted"]
