"""link_broken tells a request that never left troupe from one whose link broke with it out,
against real sockets: a closed port, a server that hangs up mid-request, one that never answers."""
from __future__ import annotations

import socket
import threading

import pytest
import requests

from actors.transports.http_base import link_broken


def _failure(url: str, timeout=(2.0, 2.0)) -> requests.RequestException:
    with pytest.raises(requests.RequestException) as caught:
        requests.post(url, data=b"{}", timeout=timeout)
    return caught.value


@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock
    sock.close()


def test_a_refused_connection_was_not_sent():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    assert link_broken(_failure(f"http://127.0.0.1:{port}/mcp")) is False


def test_a_hang_up_with_the_request_out_may_have_arrived(listener):
    def hang_up():
        conn, _ = listener.accept()
        conn.recv(65536)  # the request arrived
        conn.close()
    worker = threading.Thread(target=hang_up, daemon=True)
    worker.start()
    assert link_broken(_failure(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp")) is True
    worker.join(timeout=5)


def test_a_read_timeout_says_nothing_of_the_link(listener):
    assert link_broken(_failure(f"http://127.0.0.1:{listener.getsockname()[1]}/mcp", timeout=(2.0, 0.2))) is None
