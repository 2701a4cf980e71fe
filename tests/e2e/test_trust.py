"""Trust end to end, with real processes and a temporary HOME: nothing runs that its owner did
not approve, no MCP client can approve, and a changed tool never reaches a client unapproved."""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.servers.rug_pull import ASKED, HONEST, POISONED
from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import Troupe, TroupeHttp, json_of, server, text_of, write_config

MARKER_WAIT = 10.0  # the bar: no unapproved command has run after this long


def troupe_cli(*args: str, home: Path, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "actors.main", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HOME": str(home)})


def marker_server(marker: Path) -> dict:
    """A .mcp.json entry whose command would leave a marker file if it ever ran."""
    return {"command": "sh", "args": ["-c", f"echo ran >> {marker}; exec {PYTHON} -m tests.servers.echo"],
            "env": {"PYTHONPATH": str(ROOT)}}


class DefaultTroupe:
    """`python -m actors.main --transport http --port 0` in a project directory, default config."""

    def __init__(self, home: Path, project: Path):
        self.proc = subprocess.Popen([PYTHON, "-m", "actors.main", "--transport", "http", "--port", "0"],
                                     cwd=project, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env={**os.environ, "HOME": str(home)})
        self.base = None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            if line.startswith("troupe: serving "):
                self.base = line.split()[-1][: -len("/mcp")]
                break
        assert self.base, "troupe did not announce its URL"

    def servers(self) -> dict:
        return {s["name"]: s for s in requests.get(self.base + "/status", timeout=10).json()["servers"]}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def project(tmp_path):
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    return home, proj


@pytest.mark.slow  # ~18 s: waits out MARKER_WAIT to prove nothing ran, and for file watching
def test_project_servers_wait_for_approval_and_an_edited_line_waits_again(project, tmp_path):
    home, proj = project
    marker, marker2, marker3 = tmp_path / "ran", tmp_path / "ran-edited", tmp_path / "ran-late"
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": marker_server(marker)}}))
    troupe = DefaultTroupe(home, proj)
    try:
        pending = wait_until(lambda: troupe.servers().get("proj"), timeout=20, message="the project server listed")
        assert pending["state"] == "pending-approval" and pending["provenance"] == "project"
        assert pending["origin_file"] == str(proj / ".mcp.json")
        # a file added while troupe runs is the same: listed, never run
        (proj / ".cursor").mkdir()
        (proj / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"late": marker_server(marker3)}}))
        late = wait_until(lambda: troupe.servers().get("late"), timeout=20, message="the added file read")
        assert late["state"] == "pending-approval"
        # troupe discover lists it and probes nothing that waits
        found = troupe_cli("discover", "--json", home=home, cwd=proj)
        assert found.returncode == 0, found.stderr
        assert {s["name"]: s["trust"] for s in json.loads(found.stdout)["services"]}["proj"] == "pending-approval"
        waited = time.monotonic()
        with pytest.raises(AssertionError):
            wait_until(marker.exists, timeout=MARKER_WAIT - (time.monotonic() - waited), message="marker")
        assert not marker.exists() and not marker3.exists()
        # what waits, and the operator's approval: it runs within 5 s
        listed = troupe_cli("approvals", "--json", home=home, cwd=proj)
        assert {r["name"] for r in json.loads(listed.stdout) if r["what"] == "server"} >= {"proj", "late"}
        approved = troupe_cli("approve", "proj", home=home, cwd=proj)
        assert approved.returncode == 0, approved.stderr
        wait_until(marker.exists, timeout=5, message="the approved server started")
        wait_until(lambda: troupe.servers()["proj"]["state"] == "ready", timeout=15, message="proj ready")
        assert troupe.servers()["late"]["state"] == "pending-approval"  # approval covers one line only
        # an edited command line is a new server: it waits again, and the old one stops
        (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": marker_server(marker2)}}))
        wait_until(lambda: troupe.servers()["proj"]["state"] == "pending-approval", timeout=20,
                   message="the edited line waits again")
        assert str(marker2) in troupe.servers()["proj"]["shown_launch"]
        assert not marker2.exists()
    finally:
        troupe.stop()


def test_claude_code_approval_keys_and_other_projects(project, tmp_path):
    home, proj = project
    ran = {n: tmp_path / f"ran-{n}" for n in ("ok", "no", "other", "local")}
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "ok": marker_server(ran["ok"]), "no": marker_server(ran["no"])}}))
    (home / ".claude.json").write_text(json.dumps({"projects": {
        str(proj): {"enabledMcpjsonServers": ["ok"], "disabledMcpjsonServers": ["no"],
                    "mcpServers": {"local": marker_server(ran["local"])}},
        str(tmp_path / "elsewhere"): {"mcpServers": {"other": marker_server(ran["other"])}}}}))
    # a cloned repository cannot approve itself through its own settings file
    (proj / ".claude").mkdir()
    (proj / ".claude" / "settings.local.json").write_text(json.dumps({"enableAllProjectMcpServers": True}))
    troupe = DefaultTroupe(home, proj)
    try:
        wait_until(lambda: {"ok", "no", "local"} <= set(troupe.servers()), timeout=20, message="servers listed")
        wait_until(lambda: troupe.servers()["ok"]["state"] == "ready", timeout=20, message="ok ready")
        wait_until(lambda: troupe.servers()["local"]["state"] == "ready", timeout=20, message="local ready")
        servers = troupe.servers()
        assert servers["local"]["provenance"] == "user"  # the user added it for this project
        assert servers["no"]["state"] == "denied"
        assert "other" not in servers and not any("elsewhere" in (s["origin_file"] or "") for s in servers.values())
        assert ran["ok"].exists() and ran["local"].exists()
        assert not ran["no"].exists() and not ran["other"].exists()
    finally:
        troupe.stop()


def _discovery_config(tmp_path: Path, home: Path, proj: Path, **serve) -> Path:
    cfg = tmp_path / "troupe.yaml"
    cfg.write_text(yaml.safe_dump({
        "servers": [server("echo", "tests.servers.echo")],
        "serve": {"startup_wait": 15, "mode": "flat", **serve},
        "discovery": {"enabled": True, "home": str(home), "project_root": str(proj), "store": "memory",
                      "interval": 0, "health": {"first_check_delay": 0}}}))
    return cfg


def test_an_mcp_client_cannot_run_commands(project, tmp_path):
    home, proj = project
    marker = tmp_path / "registered-ran"
    troupe = Troupe(_discovery_config(tmp_path, home, proj))
    try:
        troupe.initialize()
        names = {t["name"] for t in troupe.request("tools/list")["result"]["tools"]}
        assert "core_mcpserver_register" in names
        assert not names & {"core_service_stop", "core_service_start", "core_service_restart",
                            "core_mcpserver_unregister"}
        reply = troupe.call("core_mcpserver_register",
                            {"name": "sneaky", "command": "sh", "args": ["-c", f"touch {marker}"]})
        text = text_of(reply)
        assert "pending-approval" in text and "troupe approve sneaky" in text
        assert troupe.server_status("sneaky")["state"] == "pending-approval"
        assert troupe.server_status("sneaky")["provenance"] == "registered"
        # nor approve it, start it, or stop what runs
        for tool in ("core_service_start", "core_service_stop", "core_service_restart"):
            refused = troupe.call(tool, {"name": "sneaky" if tool == "core_service_start" else "echo"})
            assert refused["result"]["isError"] and "operator" in text_of(refused)
        assert troupe.server_status("echo")["state"] == "ready"
        assert troupe.call("core_health_check", {"name": "sneaky"})["result"]
        assert not marker.exists()
    finally:
        troupe.close()


def test_client_admin_turns_the_operator_tools_back_on(project, tmp_path):
    home, proj = project
    troupe = Troupe(_discovery_config(tmp_path, home, proj, client_admin=True))
    try:
        troupe.initialize()
        names = {t["name"] for t in troupe.request("tools/list")["result"]["tools"]}
        assert {"core_service_stop", "core_service_restart"} <= names
        assert not troupe.call("core_service_restart", {"name": "echo"})["result"].get("isError")
    finally:
        troupe.close()


def _tools(troupe: Troupe) -> dict:
    return {t["name"]: t for t in troupe.request("tools/list")["result"]["tools"]}


def test_a_changed_tool_is_withheld_until_approved(tmp_path):
    cfg = write_config(tmp_path, [server("rug", "tests.servers.rug_pull")], mode="flat")
    troupe = Troupe(cfg)
    try:
        troupe.initialize()

        assert _tools(troupe)["rug__weather"]["description"] == HONEST
        assert text_of(troupe.call("rug__flip")) == "flipped"
        wait_until(lambda: "rug__weather" not in _tools(troupe), timeout=10, message="the changed tool withheld")
        assert "rug__exfiltrate" not in _tools(troupe)  # new tools of a pinned server wait too
        refused = troupe.call("rug__weather", {"city": "Oslo"})["result"]
        assert refused["isError"] and "troupe approve rug" in text_of({"result": refused})
        assert troupe.call("rug__exfiltrate")["result"]["isError"]
        # the operator sees the diff; the client never saw the new text
        listed = subprocess.run([PYTHON, "-m", "actors.main", "approvals", "--json", "--config", str(cfg)],
                                capture_output=True, text=True, timeout=60, cwd=ROOT)
        rows = {(r["what"], r.get("item")): r for r in json.loads(listed.stdout)}
        weather = rows[("tool", "weather")]
        assert weather["change"] == "changed" and "IGNORE PREVIOUS" in weather["diff"]
        assert rows[("tool", "exfiltrate")]["change"] == "new"
        assert not any(POISONED in json.dumps(m) for m in troupe.received)
        events = json_of(troupe.call("core_events", {"limit": 500}))["events"]
        changed = [e for e in events if e["type"] == "ToolDefinitionChanged"]
        assert {(e["item"], e["change"]) for e in changed} == {("weather", "changed"), ("exfiltrate", "new")}
        assert "IGNORE PREVIOUS" in next(e["diff"] for e in changed if e["item"] == "weather")
        done = subprocess.run([PYTHON, "-m", "actors.main", "approve", "rug", "--config", str(cfg)],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        wait_until(lambda: _tools(troupe).get("rug__weather", {}).get("description") == POISONED, timeout=5,
                   message="the approved definition shown")
        assert "rug__exfiltrate" in _tools(troupe)
        assert text_of(troupe.call("rug__weather", {"city": "Oslo"})) == "sunny in Oslo"
    finally:
        troupe.close()


def test_a_server_cannot_reach_a_client_that_is_not_calling_it(tmp_path):
    cfg = write_config(tmp_path, [server("rug", "tests.servers.rug_pull")], mode="flat")
    troupe = Troupe(cfg)
    try:
        troupe.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {"roots": {}},
                                      "clientInfo": {"name": "t", "version": "1"}})
        troupe.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        troupe.request("logging/setLevel", {"level": "info"})
        assert text_of(troupe.call("rug__ask_roots_later")) == "scheduled"
        # No call to rug until troupe has routed its request: one in flight would make this client
        # the one that triggered it. rug logs right after asking, and troupe reads rug in order.
        wait_until(lambda: any(m.get("method") == "notifications/message" and m["params"].get("data") == ASKED
                               for m in list(troupe.received)), timeout=10, message="rug's log that it asked")
        replies = wait_until(lambda: json_of(troupe.call("rug__replies")), timeout=10,
                             message="the server got an answer to its roots/list")
        assert replies[0]["id"] == "unsolicited-1" and replies[0]["error"]["code"] == -32600
        # the client never saw the request
        assert not any(m.get("method") == "roots/list" for m in troupe.received)
    finally:
        troupe.close()


@pytest.mark.slow  # CPU-heavy: see the marker in setup.cfg
def test_approval_over_http_needs_the_token_and_reaches_the_running_troupe(project, tmp_path):
    home, proj = project
    marker = tmp_path / "ran"
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": marker_server(marker)}}))
    cfg = _discovery_config(tmp_path, home, proj, auth_token="s3cret")
    troupe = TroupeHttp(cfg)
    try:
        auth = {"Authorization": "Bearer s3cret"}

        def state():
            servers = requests.get(troupe.base + "/status", headers=auth, timeout=10).json()["servers"]
            return next((s["state"] for s in servers if s["name"] == "proj"), None)
        wait_until(lambda: state() == "pending-approval", 20, message="proj waits")
        refused = troupe_cli("approve", "proj", "--url", troupe.base, "--token", "wrong", home=home, cwd=proj)
        assert refused.returncode == 1 and "401" in refused.stderr
        listed = troupe_cli("approvals", "--json", "--url", troupe.base, "--token", "s3cret", home=home, cwd=proj)
        assert [(r["name"], r["provenance"]) for r in json.loads(listed.stdout)] == [("proj", "project")]
        assert not marker.exists()
        done = troupe_cli("approve", "proj", "--url", troupe.base, "--token", "s3cret", home=home, cwd=proj)
        assert done.returncode == 0, done.stderr
        wait_until(lambda: state() == "ready", 20, message="approved over HTTP")
        assert marker.exists()
        denied = troupe_cli("deny", "proj", "--url", troupe.base, "--token", "s3cret", home=home, cwd=proj)
        assert denied.returncode == 0, denied.stderr
        wait_until(lambda: state() == "denied", 10, message="denied over HTTP")
    finally:
        troupe.stop()


HINT = re.compile(r"`(troupe (?:approve|deny) [^`]+)`")


def _hints(lines: list[str], *needles: str) -> list[str]:
    """The commands troupe's log lines containing every needle tell the operator to run."""
    return [m.group(1) for line in list(lines) if all(n in line for n in needles) for m in HINT.finditer(line)]


def _run_as_printed(hint: str, cwd: Path, path: str) -> subprocess.CompletedProcess:
    """The hint as a shell would run it: `troupe` is this checkout's entry point, started from
    another directory with another PATH than the running troupe's."""
    argv = shlex.split(hint)
    assert argv[0] == "troupe", hint
    return subprocess.run([PYTHON, "-m", "actors.main", *argv[1:]], cwd=cwd, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)})


def test_every_approval_hint_runs_as_printed_from_elsewhere_with_another_path(project, tmp_path):
    """troupe runs servers by absolute commands in a directory on its own PATH; the operator's
    shell is elsewhere, with a PATH that lacks it. Each hint troupe logs, run as printed there,
    reaches the running troupe: the withheld tool shows up and the registered server starts."""
    home, proj = project
    bin_dir, elsewhere, marker = tmp_path / "bin", tmp_path / "elsewhere", tmp_path / "sneaky-ran"
    bin_dir.mkdir()
    elsewhere.mkdir()
    for name, body in (("rug-mcp", f"exec {PYTHON} -m tests.servers.rug_pull"),
                       ("sneaky-mcp", f"echo ran >> {marker}; exec {PYTHON} -m tests.servers.echo")):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\ncd {ROOT}\n{body}\n")
        script.chmod(0o755)
    cfg = _discovery_config(tmp_path, home, proj)
    data = yaml.safe_load(cfg.read_text())
    data["servers"].append({"name": "rug", "transport": {"type": "stdio", "stdio": {
        "command": str(bin_dir / "rug-mcp")}}})
    cfg.write_text(yaml.safe_dump(data))
    shell_path = os.environ["PATH"]
    troupe = Troupe(cfg, "--log-level", "info", env={"PATH": f"{bin_dir}{os.pathsep}{shell_path}"})
    try:
        troupe.initialize()

        assert _tools(troupe)["rug__weather"]["description"] == HONEST
        assert text_of(troupe.call("rug__flip")) == "flipped"
        withheld = wait_until(lambda: _hints(troupe.stderr, "'weather'", "withheld"), timeout=10,
                              message="the withheld tool's hint logged")
        reply = troupe.call("core_mcpserver_register", {"name": "sneaky", "command": str(bin_dir / "sneaky-mcp")})
        assert "pending-approval" in text_of(reply)
        pending = wait_until(lambda: _hints(troupe.stderr, "sneaky", "pending-approval"), timeout=10,
                             message="the pending server's hint logged")
        # `troupe approvals`, run from there too, lists both with the same commands
        listed = _run_as_printed("troupe approvals", elsewhere, shell_path)
        assert listed.returncode == 0, listed.stderr
        assert {*withheld, *pending} <= {m.group(1) for m in HINT.finditer(listed.stdout)} | set(
            re.findall(r"(troupe approve \S+)   \|", listed.stdout)), listed.stdout
        for hint in {*withheld, *pending}:
            done = _run_as_printed(hint, elsewhere, shell_path)
            assert done.returncode == 0, f"{hint}: {done.stderr}"
        wait_until(lambda: _tools(troupe).get("rug__weather", {}).get("description") == POISONED, timeout=5,
                   message="the approved definition shown")
        wait_until(lambda: troupe.server_status("sneaky")["state"] == "ready", timeout=15,
                   message="the approved server started")
        assert marker.exists()
        again = _run_as_printed(pending[0], elsewhere, shell_path).stdout  # allowed already: recorded, not "applied"
        assert "reads it within a second" in again and "applied" not in again, again
        records = Path(os.environ["TROUPE_CONFIG_DIR"]) / "running"
        assert len(list(records.glob("*.json"))) == 1  # this troupe's, beside the approvals file
    finally:
        assert troupe.close() == 0
    assert not list(records.glob("*.json"))  # removed when it stopped


def test_an_approval_from_a_shell_with_another_path_is_the_one_the_troupe_applies(project, tmp_path):
    """The approval key is the launch line as the running troupe resolves it: `troupe approve`
    from a shell whose PATH lacks the server's directory approves that same server, and says so
    only once the running troupe has applied it."""
    home, proj = project
    bin_dir, marker = tmp_path / "bin", tmp_path / "ran"
    bin_dir.mkdir()
    script = bin_dir / "proj-mcp"
    script.write_text(f"#!/bin/sh\ncd {ROOT}\necho ran >> {marker}\nexec {PYTHON} -m tests.servers.echo\n")
    script.chmod(0o755)
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj": {"command": str(script)}}}))
    shell_path = os.environ["PATH"]
    troupe = TroupeHttp(_discovery_config(tmp_path, home, proj), env={"PATH": f"{bin_dir}{os.pathsep}{shell_path}"})
    try:
        def state():
            servers = requests.get(troupe.base + "/status", timeout=10).json()["servers"]
            return next((s["state"] for s in servers if s["name"] == "proj"), None)
        wait_until(lambda: state() == "pending-approval", 20, message="proj waits")
        done = subprocess.run([PYTHON, "-m", "actors.main", "approve", "proj", "--config",
                               str(tmp_path / "troupe.yaml")], cwd=proj, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PATH": shell_path, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        wait_until(lambda: state() == "ready", 15, message="the approved server started")
        assert marker.exists()
        assert "applied by the running troupe" in done.stdout
    finally:
        troupe.stop()
