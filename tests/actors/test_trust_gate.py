"""The supervisor's gate and the TrustKeeper, in-process: nothing unapproved is spawned, an
approval starts it, and a denial written by another process (the CLI) stops it."""
from __future__ import annotations

from dataclasses import replace

import pykka
import pytest

from actors.settings import config
from actors.runtime import Runtime
from actors.trust import ledger
from actors.trust import provenance as trust
from tests.support import PYTHON, ROOT, wait_until


@pytest.fixture
def runtime(tmp_path):
    cfg = config.from_data({"servers": [], "discovery": {"enabled": False},
                            "trust": {"approvals_file": str(tmp_path / "approvals.json")}})
    rt = Runtime(cfg).start()
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def project_server(marker) -> config.ServerConfig:
    base = config.from_data({"mcpServers": {"proj": {
        "command": "sh", "args": ["-c", f"echo ran >> {marker}; exec {PYTHON} -m tests.servers.echo"],
        "cwd": str(ROOT)}}}).servers[0]
    return replace(base, provenance=trust.PROJECT, origin_file="/somewhere/.mcp.json")


def state(rt, name):
    return next(s for s in rt.status()["servers"] if s["name"] == name)["state"]


def test_pending_until_approved_then_denied_from_outside(runtime, tmp_path):
    marker = tmp_path / "ran"
    runtime.apply_servers((project_server(marker),), source="embedded")
    assert state(runtime, "proj") == "pending-approval"
    assert runtime.wait_settled(5)  # a server that waits does not hold start-up
    # an MCP-side or dashboard restart cannot start it
    with pytest.raises(PermissionError, match="troupe approve proj"):
        runtime.control("restart", "proj")
    assert not marker.exists()
    assert [r["name"] for r in runtime.approvals()] == ["proj"]

    runtime.decide("proj", "approved")
    wait_until(lambda: state(runtime, "proj") == "ready", 15, message="approved server ready")
    assert marker.read_text().count("ran") == 1
    assert runtime.approvals() == []

    # `troupe deny proj` in another process writes the file; the keeper polls it
    identity = trust.identity_key(project_server(marker))
    ledger.Ledger(runtime.approvals_path).update(lambda d: ledger.decide(d, identity, "proj", ledger.DENIED))
    wait_until(lambda: state(runtime, "proj") == "denied", 5, message="denied from outside within 5 s")
    assert runtime.servers.current.get("proj").ref is None


def test_a_broken_file_approves_nothing(tmp_path):
    path = tmp_path / "approvals.json"
    path.write_text("{broken")
    cfg = config.from_data({"servers": [], "discovery": {"enabled": False},
                            "trust": {"approvals_file": str(path)}})
    rt = Runtime(cfg).start()
    try:
        rt.apply_servers((project_server(tmp_path / "ran"),), source="embedded")
        assert state(rt, "proj") == "pending-approval"
        assert not (tmp_path / "ran").exists()
    finally:
        rt.stop()
        pykka.ActorRegistry.stop_all()
