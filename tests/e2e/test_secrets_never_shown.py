"""Secrets in launch lines and URLs never leave troupe: /status, core_status, /events, logs, `troupe status`."""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
import requests

from tests.support import PYTHON, ROOT, wait_until
from tests.support.ports import start_announced, stop
from tests.support.troupe import server

SECRETS = ("SECRET1-stdio-flag", "SECRET2-stdio-next", "SECRET3-http-query", "SECRET4-gone-query")
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
EVENTS_WAIT = 20.0


@pytest.fixture
def http_backend(tmp_path):
    """A FastMCP server over HTTP: it answers whatever query string troupe sends."""
    proc, port = start_announced([PYTHON, "-m", "tests.servers.fastmcp_http_min", "--port", "0"],
                                 tmp_path / "fastmcp_http_min.log")
    yield port
    stop(proc)


def _body(resp) -> dict:
    if resp.headers["Content-Type"].startswith("application/json"):
        return resp.json()
    data = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])


def _core_tool(url: str, name: str, arguments: dict | None = None) -> str:
    with requests.Session() as s:
        init = s.post(url, json=INIT, headers=ACCEPT, timeout=10)
        h = {**ACCEPT, "Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
        s.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h, timeout=10)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}
        return _body(s.post(url, json=call, headers=h, timeout=20))["result"]["content"][0]["text"]


def _events(base: str, until) -> str:
    """/events is a stream that never ends: read until `until(text)` holds, within EVENTS_WAIT."""
    text = ""
    deadline = time.monotonic() + EVENTS_WAIT
    with requests.get(base + "/events", stream=True, timeout=(5, EVENTS_WAIT)) as resp:
        assert resp.status_code == 200
        for chunk in resp.iter_content(chunk_size=None):
            text += chunk.decode("utf-8", "replace")
            if until(text) or time.monotonic() > deadline:
                break
    return text


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_secrets_in_args_and_urls_are_never_shown(http_troupe, http_backend, dead_port):
    s1, s2, s3, s4 = SECRETS
    gone = dead_port  # nothing listens there: its error paths must not quote the query either
    servers = [
        server("keyed", "tests.servers.keyed", f"--api-key={s1}", "--token", s2),
        {"name": "remote", "transport": {"type": "streamable-http", "streamable_http": {
            "url": f"http://127.0.0.1:{http_backend}/mcp?api_key={s3}"}}},
        {"name": "gone", "transport": {"type": "streamable-http", "streamable_http": {
            "url": f"http://127.0.0.1:{gone}/mcp?token={s4}"}}},
    ]
    t = http_troupe(servers, "--log-level", "DEBUG", mode="flat")

    def states():
        report = requests.get(t.base + "/status", timeout=10).json()
        return {s["name"]: s for s in report["servers"]}
    # keyed only starts with the real credentials, remote only answers at its real URL
    wait_until(lambda: (lambda s: s["keyed"]["state"] == "ready" and s["remote"]["state"] == "ready"
                        and s["gone"]["last_error"])(states()), 30, interval=0.1, message="servers settled")

    status = requests.get(t.base + "/status", timeout=10).text
    assert _leaks(status) == []
    shown = {s["name"]: s for s in json.loads(status)["servers"]}
    assert shown["keyed"]["launch"]["args"][-3:] == ["--api-key=***", "--token", "***"]
    assert "tests.servers.keyed" in shown["keyed"]["launch"]["args"]
    assert shown["remote"]["launch"]["url"] == f"http://127.0.0.1:{http_backend}/mcp?api_key=***"
    assert shown["remote"]["url"] == f"http://127.0.0.1:{http_backend}/mcp?api_key=***"
    assert f"127.0.0.1:{gone}/mcp" in shown["gone"]["last_error"]

    core = _core_tool(t.url, "core_status")
    assert _leaks(core) == [] and "--api-key=***" in core and f"{http_backend}/mcp?api_key=***" in core
    one = _core_tool(t.url, "core_mcpserver_get", {"name": "remote"})
    assert _leaks(one) == [] and "api_key=***" in one

    events = _events(t.base, lambda text: all(n in text for n in ('"keyed"', '"remote"', '"gone"')))
    assert _leaks(events) == [] and '"gone"' in events

    cli = subprocess.run([PYTHON, "-m", "actors.main", "status", "--url", t.base, "--json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=30, env=os.environ.copy())
    assert cli.returncode == 0, cli.stderr
    assert _leaks(cli.stdout + cli.stderr) == [] and "--api-key=***" in cli.stdout
    assert "api_key=***" in cli.stdout

    dashboard = requests.get(t.base + "/", timeout=10).text
    assert _leaks(dashboard) == []
    assert t.stop() == 0
    assert _leaks("".join(t.stderr)) == []  # log lines, DEBUG included


def test_discover_shows_no_secret_args_or_query_values(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    project.mkdir()
    s1, s2, s3, _ = SECRETS
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {
        "keyed": {"command": "keyed-server", "args": [f"--api-key={s1}", "--token", s2, "--port", "7"]},
        "remote": {"url": f"http://127.0.0.1:9/mcp?api_key={s3}"}}}))
    for fmt in ([], ["--json"]):
        done = subprocess.run([PYTHON, "-m", "actors.main", "discover", "--home", str(home), "--project-root",
                               str(project), "--no-probe", *fmt], cwd=ROOT, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert _leaks(done.stdout + done.stderr) == []
        assert "--api-key=***" in done.stdout and "--port" in done.stdout
        assert "http://127.0.0.1:9/mcp?api_key=***" in done.stdout
