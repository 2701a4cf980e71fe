"""Service stores: memory for one run, SQLite (WAL, owner-only) across runs."""
from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from actors.discovery.store import MemoryStore, SqliteStore, open_store

ENTRY = {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_put_list_replace_delete(tmp_path, kind):
    store = open_store(kind, tmp_path / "s.db", tmp_path)
    store.put("b", ENTRY)
    store.put("a", {"url": "http://h/mcp"})
    store.put("a", {"url": "http://h/other"})
    assert store.registrations() == {"a": {"url": "http://h/other"}, "b": ENTRY}
    assert store.delete("a") is True and store.delete("a") is False
    assert list(store.registrations()) == ["b"]
    store.close()


def test_memory_store_hands_out_copies():
    store = MemoryStore()
    entry = {"command": "x", "args": []}
    store.put("x", entry)
    entry["args"].append("changed")
    store.registrations()["x"]["args"].append("changed too")
    assert store.registrations() == {"x": {"command": "x", "args": []}}


def test_sqlite_survives_reopen_uses_wal_and_is_owner_only(tmp_path):
    path = tmp_path / "nested" / "services.db"
    first = SqliteStore(path)
    first.put("keep", ENTRY)
    first.close()
    second = SqliteStore(path)
    assert second.registrations() == {"keep": ENTRY}
    second.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_default_sqlite_path_is_under_home(tmp_path, monkeypatch):
    monkeypatch.delenv("TROUPE_CONFIG_DIR")
    store = open_store("sqlite", None, tmp_path)
    store.put("x", ENTRY)
    store.close()
    assert (tmp_path / ".config" / "troupe" / "services.db").is_file()


def test_default_sqlite_path_follows_troupe_s_config_directory(tmp_path, monkeypatch):
    # beside the approvals file: TROUPE_CONFIG_DIR moves both, whatever `home` discovery reads
    monkeypatch.setenv("TROUPE_CONFIG_DIR", str(tmp_path / "conf"))
    store = open_store("sqlite", None, tmp_path / "home")
    store.put("x", ENTRY)
    store.close()
    assert (tmp_path / "conf" / "services.db").is_file() and not (tmp_path / "home").exists()


def test_unknown_store_kind_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="memory, sqlite"):
        open_store("redis", None, tmp_path)
