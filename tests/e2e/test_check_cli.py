"""`python -m actors.main check CONFIG` on broken configs (every problem: file, line, key), and `discover`."""
from __future__ import annotations

import json
import subprocess

from tests.support import PYTHON, ROOT

BROKEN = """\
servers:
  - name: ok
    transport:
      type: stdio
      stdio: {command: python, args: [-m, x]}
  - name: "bad name!"
    timeout: -1
    transport:
      type: stdio
      stdio:
        command: python
        env: {TOKEN: [hunter2-secret]}
  - name: web
    transport:
      type: streamable-http
      streamable_http: {url: "ftp://nope"}
  - name: ok
    transport: {type: stdio, stdio: {command: x}}
  - name: notransport
  - name: pigeon
    transport: {type: pigeon}
serve:
  port: 99999
  mode: loud
  colour: blue
extra: 1
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "actors.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_check_prints_every_problem_with_file_line_and_key(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    done = run("check", str(path))
    assert done.returncode != 0
    expected = [
        "6: servers[1].name: 'bad name!' must match",
        "7: servers[1].timeout: must be > 0 seconds",
        "12: servers[1].transport.stdio.env.TOKEN: must be a string",
        "16: servers[2].transport.streamable_http.url: must be an http:// or https:// URL",
        "17: servers[3].name: duplicate server name 'ok'",
        "19: servers[4].transport: is required",
        "21: servers[5].transport.type: 'pigeon' is not one of stdio, sse, streamable-http",
        "23: serve.port: must be 0..65535",
        "24: serve.mode: 'loud' is not one of meta, flat",
        "25: serve.colour: unknown key",
        "26: extra: unknown key",
    ]
    lines = done.stdout.splitlines()
    assert len(lines) == len(expected), done.stdout
    for line, want in zip(lines, expected):  # in file order, each naming file, line and key path
        assert line.startswith(f"{path}:{want}"), (line, want)
    assert f"{len(expected)} problem(s) found" in done.stderr
    assert "hunter2-secret" not in done.stdout + done.stderr  # a bad value may be a secret: never echoed


def test_check_syntax_errors_missing_files_and_claude_style_json(tmp_path):
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("servers:\n  - name: a\n   bad: [\n")
    done = run("check", str(syntax))
    assert done.returncode != 0 and done.stdout.startswith(f"{syntax}:3: not valid YAML/JSON")

    missing = tmp_path / "nope.yaml"
    done = run("check", str(missing))
    assert done.returncode != 0 and done.stdout.startswith(f"{missing}: cannot read config")

    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(json.dumps({"mcpServers": {"good": {"command": "x"}, "empty": {"args": ["a"]},
                                                 "web": {"url": "gopher://x"}}}, indent=2))
    done = run("check", str(claude))
    assert done.returncode != 0
    assert f"{claude}:6: mcpServers.empty: needs `command` (stdio) or `url` (http)" in done.stdout
    assert f"{claude}:11: mcpServers.web.transport.streamable_http.url: must be an http" in done.stdout

    tabs = tmp_path / "tabs.yaml"
    tabs.write_text("servers: []\nserve:\n\tmode: flat\n\tport: nine\n")
    done = run("check", str(tabs))
    assert done.returncode != 0 and f"{tabs}:4: serve.port: must be an integer" in done.stdout


def test_check_accepts_a_good_config_without_showing_secrets(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("servers:\n"
                    "  - name: a\n    transport: {type: stdio, stdio: {command: x, env: {KEY: sk-live-secret}}}\n"
                    "  - name: b\n    transport: {type: sse, sse: {url: 'http://127.0.0.1:1/sse',"
                    " headers: {Authorization: 'Bearer tok-secret'}}}\n"
                    "serve: {transport: http, mode: flat}\n")
    done = run("check", str(good))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK (2 servers: a, b; serve http/flat)" in done.stdout
    assert "secret" not in done.stdout + done.stderr
    assert run("check").returncode == 0  # the embedded default is valid


def test_discover_lists_servers_from_client_configs(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    (project / ".vscode").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"files": {
        "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
        "env": {"API_KEY": "disc-secret"}}}}))
    (project / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"remote": {
        "type": "http", "url": "http://127.0.0.1:9/mcp"}}}))
    done = run("discover", "--home", str(home), "--project-root", str(project), "--no-probe", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    launches = {json.dumps(s.get("url") or [s.get("command"), *s.get("args", [])]) for s in report["services"]}
    assert json.dumps(["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp"]) in launches
    assert json.dumps("http://127.0.0.1:9/mcp") in launches
    assert "disc-secret" not in done.stdout + done.stderr
    text = run("discover", "--home", str(home), "--project-root", str(project), "--no-probe")
    assert text.returncode == 0 and "server-filesystem" in text.stdout


def test_discover_shows_each_client_file_its_entries_and_what_was_skipped_and_why(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir(parents=True)
    codex.write_text('[mcp_servers.docs]\ncommand = "docs-mcp"\n\n[mcp_servers.gh]\nurl = "https://gh.example/mcp"\n'
                     'bearer_token_env_var = "TROUPE_TEST_UNSET_TOKEN"\n')
    goose = home / ".config" / "goose" / "config.yaml"
    goose.parent.mkdir(parents=True)
    goose.write_text("extensions:\n  developer: {type: builtin, enabled: true}\n"
                     "  fetch: {type: stdio, cmd: uvx, args: [mcp-server-fetch], enabled: false}\n")
    text = run("discover", "--home", str(home), "--project-root", str(project), "--no-probe")
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert "Codex CLI (codex)" in out and f"{codex}: 2 entries: docs, gh" in out
    assert "Goose (goose)" in out and f"{goose}: 1 entry: fetch" in out
    assert "skipped developer: a Goose builtin extension runs inside Goose" in out
    # gh waits for its token, fetch is listed but off: neither is started, both are shown
    assert "needs-input: $TROUPE_TEST_UNSET_TOKEN" in out
    assert "disabled" in out.split("fetch  [")[1].split("\n")[0]
    doc = json.loads(run("discover", "--home", str(home), "--project-root", str(project), "--no-probe",
                         "--json").stdout)
    assert doc["clients"]["goose"][0]["skipped"] == [{"name": "developer",
                                                      "reason": "a Goose builtin extension runs inside Goose"}]
    assert {s["name"]: s["needs_input"] for s in doc["services"]}["gh"] == ["$TROUPE_TEST_UNSET_TOKEN"]
