"""A running troupe follows every client's config file live: additions start, edits restart with the
new launch line and env, removals stop the server and kill its process group."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest
import yaml

from tests.support import PYTHON, wait_until
from tests.support.troupe import Troupe

# Each client's own shape for one stdio server: (path under home, render(name, args, env) → file text).
Render = Callable[[str, list, dict], str]


def _mcp_servers(name, args, env):
    return json.dumps({"mcpServers": {name: {"command": PYTHON, "args": args, "env": env}}})


def _toml_list(values) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


CLIENT_FILES: dict[str, tuple[str, Render]] = {
    "claude_desktop": (".config/Claude/claude_desktop_config.json", _mcp_servers),
    "claude_code": (".claude.json", _mcp_servers),
    "cursor": (".cursor/mcp.json", _mcp_servers),
    "vscode": (".config/Code/User/mcp.json",
               lambda n, a, e: json.dumps({"servers": {n: {"type": "stdio", "command": PYTHON, "args": a, "env": e}}})),
    "windsurf": (".codeium/windsurf/mcp_config.json", _mcp_servers),
    "cline": (".cline/data/settings/cline_mcp_settings.json", _mcp_servers),
    "roo": (".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json", _mcp_servers),
    "continue": (".continue/config.yaml", lambda n, a, e: yaml.safe_dump(
        {"name": "assistant", "mcpServers": [{"name": n, "command": PYTHON, "args": a, "env": e}]})),
    "zed": (".config/zed/settings.json",
            lambda n, a, e: "// JSONC\n" + json.dumps({"context_servers": {n: {"command": PYTHON, "args": a, "env": e}}})),
    "codex": (".codex/config.toml", lambda n, a, e: f"[mcp_servers.{n}]\ncommand = {json.dumps(PYTHON)}\n"
              f"args = {_toml_list(a)}\nenv = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in e.items())} }}\n"),
    "gemini": (".gemini/settings.json", _mcp_servers),
    "goose": (".config/goose/config.yaml", lambda n, a, e: yaml.safe_dump(
        {"extensions": {n: {"enabled": True, "type": "stdio", "cmd": PYTHON, "args": a, "envs": e}}})),
    "opencode": (".config/opencode/opencode.json", lambda n, a, e: json.dumps(
        {"mcp": {n: {"type": "local", "command": [PYTHON, *a], "environment": e}}})),
    "kiro": (".kiro/settings/mcp.json", _mcp_servers),
    "copilot": (".copilot/mcp-config.json", _mcp_servers),
    "lmstudio": (".lmstudio/mcp.json", _mcp_servers),
    "junie": (".junie/mcp/mcp.json", _mcp_servers),
}
APPLY_WITHIN = 5.0  # the promise: a change is applied within 5 s of the file changing
MARK = "TROUPE_LIVE_MARK"


class Home:
    """A home directory with one file per client, and a troupe discovering it over stdio."""

    def __init__(self, tmp: Path):
        self.home, self.project = tmp / "home", tmp / "project"
        self.home.mkdir()
        self.project.mkdir()
        self.config = tmp / "troupe.yaml"
        self.config.write_text(yaml.safe_dump({
            "servers": [], "serve": {"mode": "flat", "startup_wait": 5},
            "discovery": {"enabled": True, "home": str(self.home), "project_root": str(self.project),
                          "system_root": str(tmp / "sys"), "path_probe": {"enabled": False},
                          "health": {"enabled": False}, "interval": 0, "watch_interval": 0.5}}))
        self.troupe: Troupe | None = None

    def write(self, client: str, mark: str, extra_arg: str = "") -> None:
        rel, render = CLIENT_FILES[client]
        args = ["-m", "tests.servers.echo", "--name", client, *([extra_arg] if extra_arg else [])]
        path = self.home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(f"{client}-live", args, {MARK: mark}))

    def remove(self, client: str) -> None:
        (self.home / CLIENT_FILES[client][0]).unlink()

    def start(self) -> Troupe:
        self.troupe = Troupe(self.config, env={"TROUPE_PEERS_DIR": os.environ.get("TROUPE_PEERS_DIR", "")})
        self.troupe.initialize()
        return self.troupe

    def servers(self) -> dict:
        assert self.troupe is not None
        return {s["name"]: s for s in self.troupe.status()["servers"] if s["name"].endswith("-live")}

    def ready(self) -> dict:
        """name → pid of every live-test server that is ready."""
        return {n: s["pid"] for n, s in self.servers().items() if s["state"] == "ready"}


def _environ(pid: int) -> dict:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def _alive(pid: int) -> bool:
    """Running and not a zombie; a process that exits while we look is not alive."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False


def _group_exists(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _all_names() -> set:
    return {f"{client}-live" for client in CLIENT_FILES}


def _wait_all_ready(home: Home, timeout: float = 60) -> None:
    try:
        wait_until(lambda: set(home.ready()) == _all_names(), timeout, message="every server ready")
    except AssertionError as exc:  # say which were not, and why
        assert home.troupe is not None
        errors = (home.troupe.status().get("discovery") or {}).get("errors")
        raise AssertionError(f"{exc}: {[(n, s['state'], s.get('reason')) for n, s in home.servers().items()]}; "
                             f"discovery errors: {errors}") from None


@pytest.fixture
def home(tmp_path):
    h = Home(tmp_path)
    yield h
    if h.troupe is not None:
        h.troupe.close()


@pytest.mark.slow  # starts a server for each of the 17 clients
def test_a_server_added_to_any_client_file_starts(home):
    home.start()
    assert home.servers() == {}
    for client in CLIENT_FILES:
        home.write(client, "v1")
    wait_until(lambda: set(home.servers()) == _all_names(), APPLY_WITHIN + 5, message="every client's addition seen")
    _wait_all_ready(home)
    for name, pid in home.ready().items():
        assert _environ(pid)[MARK] == "v1", name


@pytest.mark.slow
def test_an_edit_to_any_client_file_restarts_with_the_new_launch_line_and_env(home):
    for client in CLIENT_FILES:
        home.write(client, "v1")
    home.start()
    _wait_all_ready(home)
    before = home.ready()
    for client in CLIENT_FILES:
        home.write(client, "v2", extra_arg="--prefix-tools=v2_")
    wait_until(lambda: all(pid != before[n] for n, pid in home.ready().items()) and set(home.ready()) == _all_names(),
               60, message="every server restarted")
    for name, pid in home.ready().items():
        assert _environ(pid)[MARK] == "v2", name
        assert "--prefix-tools=v2_" in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0"), name
    wait_until(lambda: not any(_alive(pid) for pid in before.values()), 10, message="old processes gone")


@pytest.mark.slow
def test_a_server_removed_from_any_client_file_stops_and_its_process_group_dies(home):
    for client in CLIENT_FILES:
        home.write(client, "v1")
    home.start()
    _wait_all_ready(home)
    pids = home.ready()
    groups = {name: os.getpgid(pid) for name, pid in pids.items()}
    for client in CLIENT_FILES:
        home.remove(client)
    wait_until(lambda: home.servers() == {}, APPLY_WITHIN + 5, message="every removal applied")
    wait_until(lambda: not any(_alive(pid) for pid in pids.values()), 10, message="every process stopped")
    # nothing of any server's process group is left (once troupe has reaped its children)
    wait_until(lambda: not any(_group_exists(g) for g in groups.values()), 10, message="every process group gone")


@pytest.mark.slow
def test_an_entry_with_an_unresolvable_variable_waits_in_needs_input_and_never_runs(home, tmp_path):
    marker = tmp_path / "ran"
    path = home.home / ".cursor" / "mcp.json"
    path.parent.mkdir(parents=True)
    args = ["-c", f"open({str(marker)!r}, 'w').write('ran')", "${env:TROUPE_TEST_NEVER_SET}"]
    path.write_text(json.dumps({"mcpServers": {"waits-live": {"command": PYTHON, "args": args}}}))
    home.start()
    wait_until(lambda: home.servers().get("waits-live", {}).get("state") == "needs-input", 15,
               message="the entry listed as needing input")
    reason = home.servers()["waits-live"]["reason"]
    assert "${env:TROUPE_TEST_NEVER_SET}" in reason and str(path) in reason
    # the file is fixed: the edit is a new launch line, and it starts
    home.write("cursor", "v1")
    wait_until(lambda: "cursor-live" in home.ready(), 30, message="the fixed entry started")
    assert "waits-live" not in home.servers() and not marker.exists()
