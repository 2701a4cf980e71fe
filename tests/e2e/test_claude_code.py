"""Claude Code (`claude mcp list`, a real MCP client) sees troupe connected over stdio, Streamable
HTTP and legacy SSE, registered the ways a user does it (`claude mcp add --scope user`, and a
project's `.mcp.json` the user has approved), in a scratch HOME: listing needs no login and no
network. Claude Code records each stderr line of a stdio server as an error in its debug log:
troupe's default leaves none there."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support import PYTHON, ROOT, peer_bin
from tests.support.troupe import TroupeHttp, server, write_config

CLAUDE_TIMEOUT = 120  # one claude run; it checks every server at once, each within its own 30 s
CONNECTED = "✔ Connected"


@pytest.fixture
def claude(tmp_path):
    """run(*args) → the CompletedProcess of `claude ARGS` in a scratch HOME, from the project dir."""
    binary = peer_bin("claude")
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC"))}
    env.update(HOME=str(home), CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
               DISABLE_TELEMETRY="1")

    def run(*args: str) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run([binary, *args], cwd=project, env=env, capture_output=True, text=True,
                                  timeout=CLAUDE_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"`claude {' '.join(args)}` did not finish within {CLAUDE_TIMEOUT}s:\n"
                                 f"{exc.stdout or ''}{exc.stderr or ''}") from None
        assert done.returncode == 0, f"`claude {' '.join(args)}` exited {done.returncode}:\n{done.stdout}{done.stderr}"
        return done
    run.home, run.project = home, project  # type: ignore[attr-defined]
    return run


def _approve_project_servers(home: Path, project: Path, names: list[str]) -> None:
    """What answering Claude Code's approval prompt for a `.mcp.json` records (`claude` asks it
    interactively; `claude mcp list` shows such a server as pending until then)."""
    path = home / ".claude.json"
    state = json.loads(path.read_text()) if path.exists() else {}
    state.setdefault("projects", {})[str(project)] = {"hasTrustDialogAccepted": True, "enabledMcpjsonServers": names}
    path.write_text(json.dumps(state))


def test_claude_mcp_list_shows_troupe_connected_over_stdio_http_and_sse(claude, tmp_path):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo")])
    http = TroupeHttp(config)
    try:
        launch = [PYTHON, "-m", "actors.main", "--config", str(config)]
        # troupe from this checkout, with the test's own approvals file (tests/conftest.py)
        env = {"PYTHONPATH": str(ROOT), "TROUPE_CONFIG_DIR": os.environ["TROUPE_CONFIG_DIR"]}
        claude("mcp", "add", "--scope", "user", "troupe-stdio",
               *(arg for k, v in env.items() for arg in ("-e", f"{k}={v}")), "--", *launch)
        claude("mcp", "add", "--scope", "user", "--transport", "http", "troupe-http", http.url)
        claude("mcp", "add", "--scope", "user", "--transport", "sse", "troupe-sse", http.base + "/sse")
        (claude.project / ".mcp.json").write_text(json.dumps(
            {"mcpServers": {"troupe-project": {"command": PYTHON, "args": launch[1:], "env": env}}}))
        _approve_project_servers(claude.home, claude.project, ["troupe-project"])

        debug_log = tmp_path / "claude-debug.txt"
        listed = claude("--debug-file", str(debug_log), "mcp", "list")
        out = listed.stdout + listed.stderr
        lines = {line.split(":", 1)[0]: line for line in listed.stdout.splitlines() if ":" in line}
        for name in ("troupe-stdio", "troupe-http", "troupe-sse", "troupe-project"):
            assert name in lines, f"`claude mcp list` does not list {name}:\n{out}"
            assert CONNECTED in lines[name], f"{name} not connected:\n{out}\ntroupe (http) stderr:\n" \
                                             + "".join(http.stderr[-30:])
    finally:
        assert http.stop() == 0

    # Claude Code's debug log names each stderr line of a stdio server
    # `[ERROR] MCP server "NAME" Server stderr: …`; troupe at its default level writes none.
    assert debug_log.exists(), f"`claude --debug-file {debug_log}` wrote no debug log:\n{out}"
    text = debug_log.read_text(errors="replace")
    for name in ("troupe-stdio", "troupe-project"):
        assert f'MCP server "{name}": Successfully connected' in text, text[-3000:]
        assert f'MCP server "{name}" Server stderr' not in text, text[-3000:]
