"""A Connection stopped with its opening request out (a client leaving during start): the lost
probe is no era verdict and no failure; the Connection only retires."""
from __future__ import annotations

import pykka
import pytest

from actors.messages import ConnectionFailed, ConnectionRetired, EraLearned
from actors.settings import config
from actors.upstream.connection import Connection
from tests.support import PYTHON, ROOT, wait_until


class _Recorder(pykka.ThreadingActor):
    """Stands for the Supervisor: keeps every message a Connection tells it."""

    def __init__(self, seen: list) -> None:
        super().__init__()
        self.seen = seen

    def on_receive(self, message):
        self.seen.append(message)


@pytest.fixture
def slow_server():
    cfg = config.from_data({"servers": [{"name": "slow", "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", "tests.servers.slow_start", "--delay", "30"], "work_dir": str(ROOT)}}}],
        "discovery": {"enabled": False}})
    yield cfg.servers[0]
    pykka.ActorRegistry.stop_all()


def test_a_connection_stopped_while_probing_learns_no_era(slow_server):
    seen: list = []
    supervisor = _Recorder.start(seen)
    conn = Connection.start(slow_server, 1, supervisor, None)
    # The probe is out once the server's process runs (it reads nothing for 30 s).
    wait_until(lambda: conn.proxy().describe().get(timeout=5).get("pid"), 10, message="the server spawned")
    conn.stop(timeout=10)
    wait_until(lambda: any(isinstance(m, ConnectionRetired) for m in seen), 10, message="the connection retired")
    # Told once more than needed, EraLearned(legacy) made the next generation of a modern server
    # open with initialize, and ConnectionFailed would restart a server troupe chose to stop.
    assert not [m for m in seen if isinstance(m, (EraLearned, ConnectionFailed))], seen
