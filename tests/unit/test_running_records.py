"""`troupe approve NAME` against the running records troupes keep beside the approvals file:
it finds a server whatever config it came from, decides it under the running troupe's own
identity, refuses to guess between two configs, and never reports a decision the troupe did
not apply as done."""
from __future__ import annotations

import os
import subprocess
import sys

import orjson
import pytest

from actors.trust import cli, cli_running, ledger, running


def _record(approvals: str, servers: dict, config: str | None = None, pid: int | None = None,
            runtime: str = "t") -> None:
    path = running.folder(approvals) / f"{pid or os.getpid()}-{runtime}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    pid = pid or os.getpid()
    path.write_bytes(orjson.dumps({"pid": pid, "started": running._start_time(pid), "config": config,
                                   "approvals_file": approvals, "servers": servers}))


def _pending(identity: str) -> dict:
    return {"identity": identity, "state": running.PENDING, "provenance": "project", "launch": "x", "file": None}


@pytest.fixture
def approvals(tmp_path, monkeypatch):
    monkeypatch.setenv("TROUPE_CONFIG_DIR", str(tmp_path))
    return ledger.default_path()


def test_a_record_written_by_a_process_that_is_gone_is_not_read(approvals):
    _record(approvals, {"a": _pending("stdio:a")})
    _record(approvals, {"b": _pending("stdio:b")}, pid=2 ** 22 + 12345, runtime="gone")  # no such pid
    # a pid another process took since: the start time differs
    reused = running.folder(approvals) / "1-reused.json"
    reused.write_bytes(orjson.dumps({"pid": 1, "started": -1, "servers": {"c": _pending("stdio:c")}}))
    assert [sorted(r["servers"]) for r in running.live(approvals)] == [["a"]]
    running.prune(approvals)  # what a troupe does at start: a killed one's record goes
    assert [p.name for p in running.folder(approvals).iterdir()] == [f"{os.getpid()}-t.json"]


def test_a_decision_the_running_troupe_does_not_apply_is_not_reported_as_done(approvals, monkeypatch, capsys):
    _record(approvals, {"srv": _pending("stdio:/opt/bin/srv --flag")})  # this process never applies it
    monkeypatch.setattr(cli_running, "CONFIRM_TIMEOUT", 0.3)
    assert cli.run("approve", ["srv"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert "not allowed after 0.3s" in err and "recorded in" in err
    # the decision is in the file, under the running troupe's identity (not one this shell computed)
    data = ledger.Ledger(approvals).read()
    assert data["servers"]["stdio:/opt/bin/srv --flag"]["decision"] == ledger.APPROVED


def test_a_decision_for_an_allowed_server_is_recorded_not_reported_as_applied(approvals, capsys):
    # a troupe that shows the server allowed already (its withheld tools were what waited): its
    # record cannot show the withheld tools accepted, so the output does not claim they were
    _record(approvals, {"srv": {**_pending("stdio:srv"), "state": running.ALLOWED}})
    assert cli.run("approve", ["srv"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert f"the running troupe (pid {os.getpid()}) reads it within a second" in out and "applied" not in out


def test_a_server_that_needs_an_input_value_is_recorded_and_says_so(approvals, capsys):
    _record(approvals, {"srv": {**_pending("stdio:srv"), "state": running.NEEDS_INPUT}})
    assert cli.run("approve", ["srv"]) == cli.EXIT_OK
    assert "still needs an input value" in capsys.readouterr().out


def test_two_configs_with_a_server_of_one_name_are_never_guessed_between(approvals, tmp_path, capsys):
    one, two = str(tmp_path / "one.yaml"), str(tmp_path / "two.yaml")
    _record(approvals, {"srv": _pending("stdio:srv one")}, config=one, runtime="one")
    _record(approvals, {"srv": _pending("stdio:srv two")}, config=two, runtime="two")
    assert cli.run("deny", ["srv"]) == cli.EXIT_FAILED
    err = capsys.readouterr().err
    assert f"`troupe deny srv --config {one}`" in err and f"`troupe deny srv --config {two}`" in err
    assert ledger.Ledger(approvals).read()["servers"] == {}  # nothing decided
    quiet = tmp_path / "quiet.yaml"  # no discovery: the listing reads files only
    quiet.write_text("servers: []\ndiscovery: {enabled: false}\n")
    assert cli.run("approvals", ["--config", str(quiet)]) == cli.EXIT_OK
    listed = capsys.readouterr().out
    assert f"troupe approve srv --config {one}" in listed and f"troupe approve srv --config {two}" in listed


def test_an_offline_approval_covers_the_launch_line_whatever_path_the_troupe_has(approvals, tmp_path, monkeypatch):
    """No troupe runs: the decision must hold for a troupe started later on another PATH (an
    absolute command is keyed by its name on a PATH that finds it, else by its real path)."""
    from dataclasses import replace

    import yaml

    from actors.settings import config as config_mod
    from actors.trust import provenance as trust
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "srv"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    config = tmp_path / "troupe.yaml"
    config.write_text(yaml.safe_dump({"discovery": {"enabled": False}, "servers": [
        {"name": "srv", "transport": {"type": "stdio", "stdio": {"command": str(tool), "args": ["--flag"]}}}]}))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")  # the approving shell finds it
    assert cli.run("approve", ["srv", "--config", str(config)]) == cli.EXIT_OK
    server = config_mod.load(str(config)).servers[0]
    decisions = {key: entry["decision"] for key, entry in ledger.Ledger(approvals).read()["servers"].items()}
    waiting = replace(server, provenance="project")  # one that needs the approval
    assert trust.verdict(waiting, decisions) == trust.ALLOWED
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # the troupe that starts it later does not
    assert trust.verdict(waiting, decisions) == trust.ALLOWED, decisions


def test_one_name_with_two_launch_lines_in_one_config_is_never_guessed_between(approvals, capsys, monkeypatch):
    """Two projects' servers under one config: a plain `troupe approve github` must not approve
    both, nor pick one; it names each with the command that decides it alone."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                              stdin=subprocess.PIPE)  # a second live pid
    try:
        _record(approvals, {"github": _pending("stdio:gh-mcp --repo a")}, runtime="a")
        _record(approvals, {"github": _pending("stdio:gh-mcp --repo b")}, pid=holder.pid, runtime="b")
        assert cli.run("approve", ["github"]) == cli.EXIT_FAILED
        err = capsys.readouterr().err
        assert "different servers named 'github'" in err, err
        assert f"`troupe approve github --pid {os.getpid()}` for x" in err and f"--pid {holder.pid}`" in err
        assert ledger.Ledger(approvals).read()["servers"] == {}  # nothing decided
        monkeypatch.setattr(cli_running, "CONFIRM_TIMEOUT", 0.2)
        assert cli.run("approve", ["github", "--pid", str(holder.pid)]) == cli.EXIT_FAILED  # nobody applies it
        assert set(ledger.Ledger(approvals).read()["servers"]) == {"stdio:gh-mcp --repo b"}
    finally:
        holder.kill()
        holder.wait()
