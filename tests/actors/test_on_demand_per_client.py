"""An on-demand `share: per_client` server against the real Runtime and a real stdio server:
its own (listing) connection does not stop for idleness while a client's own upstream is
attached, and stops once the last one is gone."""
from __future__ import annotations

import time

import gevent
import pykka
import pytest

from actors.messages import Forward
from actors.runtime import Runtime
from actors.settings import config
from actors.supervision import on_demand
from tests.support import PYTHON, ROOT, wait_until


class _Client(pykka.ThreadingActor):
    """Stands for a Session: an actor whose ref owns an upstream."""


@pytest.fixture
def runtime(monkeypatch):
    monkeypatch.setattr(on_demand, "LEARN_LINGER", 1.5)  # room to attach a client while it learns
    cfg = config.from_data({"servers": [{"name": "asker", "share": "per_client", "start": "on_demand",
                                         "idle_stop": 0.3, "transport": {"type": "stdio", "stdio": {
                                             "command": PYTHON, "args": ["-m", "tests.servers.asker"],
                                             "work_dir": str(ROOT)}}}],
                            "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def state(rt) -> str:
    return rt.servers.current.get("asker").state


def test_the_listing_connection_stays_while_a_clients_own_upstream_is_attached(runtime):
    wait_until(lambda: runtime.connection("asker") is not None, 15, message="its own connection up (learning)")
    client, answers = _Client.start(), []
    ref, why = runtime.connection_or_status("asker", client)
    assert ref is not None, why
    ref.tell(Forward("tools/call", {"name": "whoami", "arguments": {}}, answers.append, origin=client,
                     origin_request=1))
    wait_until(lambda: answers, 15, message="the client's call answered by its own upstream")
    deadline = time.monotonic() + 3.0  # past the learning linger and ten idle_stops
    while time.monotonic() < deadline:
        assert state(runtime) == "ready"  # attached: it is kept
        gevent.sleep(0.05)
    runtime.client_left(client)
    wait_until(lambda: state(runtime) == "idle", 10, message="idle once no client's upstream is attached")
    client.stop()
