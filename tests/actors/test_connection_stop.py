"""A Connection stopped with its opening request out (a client leaving during start): the lost
probe is no era verdict and no failure; the Connection only retires."""
from __future__ import annotations

import socket

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
def silent_port():
    """A loopback port that takes connections and never answers a byte (the kernel's backlog)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


def _server(kind: str, port: int):
    if kind == "stdio":  # slow_start reads nothing for 30 s
        transport = {"type": "stdio", "stdio": {"command": PYTHON, "work_dir": str(ROOT),
                                                "args": ["-m", "tests.servers.slow_start", "--delay", "30"]}}
    else:
        transport = {"type": "streamable-http", "streamable_http": {"url": f"http://127.0.0.1:{port}/mcp"}}
    return config.from_data({"servers": [{"name": "slow", "transport": transport}],
                             "discovery": {"enabled": False}}).servers[0]


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_a_connection_stopped_while_probing_learns_no_era_and_reports_no_failure(kind, silent_port):
    seen: list = []
    supervisor = _Recorder.start(seen)
    try:
        conn = Connection.start(_server(kind, silent_port), 1, supervisor, None)
        # on_start opened the transport and sent the probe; this ask is answered after it
        assert conn.proxy().describe().get(timeout=5) is not None
        conn.stop(timeout=10)
        wait_until(lambda: any(isinstance(m, ConnectionRetired) for m in seen), 10, message="the connection retired")
        # EraLearned(legacy) made the next generation of a modern server open with initialize, and
        # ConnectionFailed (with its WARNING) would restart a server troupe chose to stop.
        assert not [m for m in seen if isinstance(m, (EraLearned, ConnectionFailed))], seen
    finally:
        pykka.ActorRegistry.stop_all()
