"""Shared test helpers: bounded polling, free ports, peer locations."""
from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("TROUPE_PEERS_DIR", ROOT / ".peers"))
PYTHON = sys.executable


def wait_until(condition, timeout: float = 10.0, interval: float = 0.02, message: str = "condition"):
    """Poll condition() until it returns a truthy value; fail loudly after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def free_port() -> int:
    """A port free now, not later: handed to a child it races any other process that binds.

    Only for a peer that cannot bind port 0 itself, through ports.start_with_port_retry; tell
    our own children port 0 (ports.start_announced), and use the dead_port fixture for a port
    that must refuse connections.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peer_bin(name: str) -> str:
    """Path of an npm peer's executable; CI installs them, so a missing one is a failure."""
    path = PEERS / "node_modules" / ".bin" / name
    if not path.exists():
        raise AssertionError(f"peer {name} not installed at {path}: run .ci/run or npm install into {PEERS}")
    return str(path)
