"""Discovered and registered servers are really connected and callable through troupe."""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import Troupe, text_of


def _config(tmp_path, home, project):
    path = tmp_path / "troupe.yaml"
    path.write_text(yaml.safe_dump({
        "servers": [],
        "serve": {"mode": "flat", "startup_wait": 20},
        "discovery": {"enabled": True, "home": str(home), "project_root": str(project),
                      "path_probe": {"enabled": False}, "store": "sqlite",
                      "store_path": str(tmp_path / "services.db"), "health": {"enabled": False}}}))
    return path


def _echo_entry(name: str) -> dict:
    return {"command": PYTHON, "args": ["-m", "tests.servers.echo", "--name", name], "cwd": str(ROOT)}


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_discovered_server_is_connected_and_callable_and_registration_persists(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    project.mkdir()
    (home / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"cursor-echo": _echo_entry("c")}}))
    config = _config(tmp_path, home, project)

    t = Troupe(config)
    try:
        t.initialize()
        wait_until(lambda: any(s["name"] == "cursor-echo" and s["state"] == "ready" for s in t.status()["servers"]),
                   30, message="discovered server connected")
        assert text_of(t.call("cursor-echo__echo", {"text": "found"})) == "found"
        status = t.status()
        assert status["discovery"]["services"] >= 1
        registered = t.call("core_mcpserver_register", {"name": "reg-echo", **_echo_entry("r")})
        assert not registered["result"].get("isError"), registered
        state = _state_of(t)
        wait_until(lambda: state("reg-echo") == "pending-approval", 30, message="registration waits")
        _approve(config, "reg-echo")
        wait_until(lambda: state("reg-echo") == "ready", 30, message="registered server connected once approved")
        assert text_of(t.call("reg-echo__echo", {"text": "registered"})) == "registered"
        # a client config edit is picked up by the watcher: a second server appears, and waits
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"project-echo": _echo_entry("p")}}))
        wait_until(lambda: state("project-echo") == "pending-approval", 30, message="edit picked up")
        _approve(config, "project-echo")
        wait_until(lambda: state("project-echo") == "ready", 30, message="project server approved")
    finally:
        t.close()

    # a restart of troupe keeps the registration (SQLite store), even with the client files gone
    (home / ".cursor" / "mcp.json").unlink()
    (project / ".mcp.json").unlink()
    t = Troupe(config)
    try:
        t.initialize()
        wait_until(lambda: any(s["name"] == "reg-echo" and s["state"] == "ready" for s in t.status()["servers"]),
                   30, message="registration survived the restart")
        assert text_of(t.call("reg-echo__echo", {"text": "still"})) == "still"
        assert not any(s["name"] == "cursor-echo" for s in t.status()["servers"])
        # removing a server is an operator act, not a model's
        assert t.call("core_mcpserver_unregister", {"name": "reg-echo"})["result"].get("isError") is True
    finally:
        t.close()


def _state_of(t):
    def state(name):
        return next((s["state"] for s in t.status()["servers"] if s["name"] == name), None)
    return state


def _approve(config, name: str) -> None:
    done = subprocess.run([PYTHON, "-m", "actors.main", "approve", name, "--config", str(config)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
