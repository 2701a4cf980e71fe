"""Service store for passive registrations: in memory, or SQLite (stdlib, WAL) that survives restarts."""
from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Mapping

BUSY_TIMEOUT_S = 5.0  # another troupe on the same file holds the lock briefly at most
SCHEMA = """
CREATE TABLE IF NOT EXISTS registrations (
    name TEXT PRIMARY KEY,
    entry TEXT NOT NULL,          -- the Claude-style entry as JSON (env values included: a config file)
    registered_at REAL NOT NULL
)
"""


class MemoryStore:
    """Registrations for one run (the default for tests)."""

    kind = "memory"

    def __init__(self) -> None:
        self._rows: dict[str, tuple[dict, float]] = {}

    def registrations(self) -> dict[str, dict]:
        return {name: json.loads(json.dumps(entry)) for name, (entry, _) in sorted(self._rows.items())}

    def put(self, name: str, entry: Mapping) -> None:
        self._rows[name] = (json.loads(json.dumps(dict(entry))), time.time())

    def delete(self, name: str) -> bool:
        return self._rows.pop(name, None) is not None

    def close(self) -> None:
        pass


class SqliteStore:
    """One small table; every write commits at once, so a crash loses nothing registered."""

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The file may hold env values of registered servers: owner-only, like a config file.
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600)
        os.close(fd)
        # check_same_thread off: under gevent every actor shares the OS thread anyway,
        # and only the engine actor touches this connection.
        self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(SCHEMA)

    def registrations(self) -> dict[str, dict]:
        rows = self._db.execute("SELECT name, entry FROM registrations ORDER BY name").fetchall()
        out = {}
        for name, entry in rows:
            try:
                out[name] = json.loads(entry)
            except ValueError:
                continue  # a row we cannot read is skipped, not fatal
        return out

    def put(self, name: str, entry: Mapping) -> None:
        self._db.execute("INSERT OR REPLACE INTO registrations (name, entry, registered_at) VALUES (?, ?, ?)",
                         (name, json.dumps(dict(entry)), time.time()))

    def delete(self, name: str) -> bool:
        return self._db.execute("DELETE FROM registrations WHERE name = ?", (name,)).rowcount > 0

    def close(self) -> None:
        try:
            self._db.close()
        except sqlite3.Error:
            pass


def open_store(kind: str, path: str | os.PathLike | None, home: str | os.PathLike):
    """memory | sqlite; the SQLite file defaults to services.db in troupe's config directory:
    $TROUPE_CONFIG_DIR, as for the approvals file beside it, else ~/.config/troupe under `home`."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        folder = os.environ.get("TROUPE_CONFIG_DIR") or Path(home) / ".config" / "troupe"
        return SqliteStore(path or Path(folder) / "services.db")
    raise ValueError(f"discovery.store: {kind!r} is not one of memory, sqlite")
