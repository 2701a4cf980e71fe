"""A private file is replaced whole and owner-only; only a durable one waits for the disk."""
from __future__ import annotations

import os
import stat

from actors import private_files
from actors.trust import running


def _fsyncs(monkeypatch) -> list:
    calls: list = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real(fd))
    return calls


def test_a_durable_write_is_fsynced_before_it_replaces_the_file(tmp_path, monkeypatch):
    calls = _fsyncs(monkeypatch)
    target = tmp_path / "approvals.json"
    target.write_bytes(b"old")
    private_files.write_private(target, b"new", ".approvals-")
    assert len(calls) == 1
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["approvals.json"]


def test_the_running_record_is_replaced_whole_without_waiting_for_the_disk(tmp_path, monkeypatch):
    """It is rewritten as servers change and a crash leaves it stale anyway: no fsync, so a start
    needs no worker thread to keep the hub free of one (actors/off_hub.py)."""
    calls = _fsyncs(monkeypatch)
    approvals = str(tmp_path / "approvals.json")
    path = running.record_path(approvals, "r1")
    running.write(path, approvals, None, {"echo": {"identity": "stdio:echo", "state": running.ALLOWED}})
    running.write(path, approvals, None, {"echo": {"identity": "stdio:echo", "state": running.PENDING}})
    assert calls == []
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    records = running.live(approvals)
    assert [r["servers"]["echo"]["state"] for r in records] == [running.PENDING]
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temporary file left
