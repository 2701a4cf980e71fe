"""Early start (actors/supervision/early_start.py): which of the config's servers launch before the
runtime exists, and that each process goes to the transport of exactly its launch spec, once."""
from __future__ import annotations

import dataclasses

import pytest

from actors.settings import config as config_mod
from actors.supervision import early_start
from actors.trust import ledger
from actors.trust.provenance import identity_key
from tests.support import PYTHON, ROOT


def _server(name: str, module: str = "tests.servers.echo", **extra) -> dict:
    return {"name": name, "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", module], "work_dir": str(ROOT)}}, **extra}


def _config(*servers: dict):
    return config_mod.from_data({"servers": list(servers), "discovery": {"enabled": False}})


@pytest.fixture
def approvals(tmp_path):
    return str(tmp_path / "approvals.json")


def _stop(early: early_start.EarlyStarts) -> None:
    early.discard_rest()


def test_only_what_the_supervisor_would_launch_at_once_starts_early(approvals):
    config = _config(_server("always"), _server("lazy", start="on_demand"), _server("off", enabled=False),
                     _server("mine", share="per_client"),
                     {"name": "web", "transport": {"type": "streamable-http", "streamable_http": {"url": "http://127.0.0.1:9/mcp"}}})
    early = early_start.start(config, approvals)
    try:
        assert len(early) == 1
        for name in ("lazy", "off", "mine", "web"):
            server = next(s for s in config.servers if s.name == name)
            assert not early_start.eligible(server), name
            assert early.take(name, server.stdio) is None
        always = config.servers[0]
        proc = early.take("always", always.stdio)
        assert proc is not None and proc.poll() is None  # running, handed over
        assert early.take("always", always.stdio) is None  # once only
    finally:
        _stop(early)
    proc.kill()
    proc.wait(timeout=10)


def test_a_process_started_from_another_spec_is_stopped_never_handed_over(approvals):
    config = _config(_server("echo"))
    early = early_start.start(config, approvals)
    spec = config.servers[0].stdio
    assert spec is not None and len(early) == 1
    changed = dataclasses.replace(spec, args=(*spec.args, "--changed"))
    assert early.take("echo", changed) is None
    assert len(early) == 0


def test_a_server_the_operator_denied_never_starts_early(approvals):
    config = _config(_server("denied"), _server("kept", "tests.servers.counter"))
    ledger.Ledger(approvals).update(lambda data: ledger.decide(data, identity_key(config.servers[0]), "denied",
                                                               ledger.DENIED))
    early = early_start.start(config, approvals)
    try:
        assert early.take("denied", config.servers[0].stdio) is None
        assert len(early) == 1  # the other one did start
    finally:
        _stop(early)


def test_an_unreadable_approvals_file_starts_nothing_early(tmp_path):
    path = tmp_path / "approvals.json"
    path.mkdir()  # a directory: the ledger cannot read it
    assert len(early_start.start(_config(_server("echo")), str(path))) == 0


def test_a_cluster_starts_nothing_early(approvals):
    config = dataclasses.replace(_config(_server("echo")), cluster=object())
    assert len(early_start.start(config, approvals)) == 0


def test_at_most_early_max_start_early(approvals):
    config = _config(*[_server(f"s{i}") for i in range(early_start.EARLY_MAX + 2)])
    early = early_start.start(config, approvals)
    try:
        assert len(early) == early_start.EARLY_MAX
    finally:
        _stop(early)
