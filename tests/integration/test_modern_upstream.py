"""Modern (2026-07-28) upstreams in process: the health probe, the stateless HTTP transport
(headers, a refusal's error body, cancel by closing the response) and a Connection's era."""
from __future__ import annotations

import gevent
import gevent.queue
import orjson
import pykka
import pytest

from actors.discovery.probe import probe
from actors.messages import Forward
from actors.protocol import jsonrpc, modern_client
from actors.runtime import Runtime
from actors.settings import config
from actors.transports.streamable_http import StreamableHttpTransport
from tests.support import PYTHON, ROOT, wait_until
from tests.support.ports import start_announced, stop


def stdio_config(module: str) -> config.ServerConfig:
    cfg = config.from_data({"servers": [{"name": "m", "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", module], "work_dir": str(ROOT)}}}], "discovery": {"enabled": False}})
    return cfg.servers[0]


@pytest.fixture(scope="module")
def modern_url(tmp_path_factory):
    log = tmp_path_factory.mktemp("modern") / "modern_http.log"
    proc, port = start_announced([PYTHON, "-m", "tests.servers.modern_only", "--http", "0"], log)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


def test_health_probe_of_a_modern_only_server():
    assert probe(stdio_config("tests.servers.modern_only"), 10.0) == (True, "ok: 9 tools", 9)


def test_health_probe_of_a_strict_legacy_server_is_unchanged():
    ok, detail, tools = probe(stdio_config("tests.servers.strict_legacy"), 10.0)
    assert ok and tools > 0, detail


def _transport(url: str):
    inbox: gevent.queue.Queue = gevent.queue.Queue()
    t = StreamableHttpTransport("m", url, {}, inbox.put, lambda reason: inbox.put(("closed", reason)))
    t.open()
    return t, inbox


def _received(t, inbox, rid: int) -> list:
    t.send(jsonrpc.request(rid, "tools/call", modern_client.envelope({"name": "received"})))
    answer = inbox.get(timeout=5)
    return orjson.loads(answer["result"]["content"][0]["text"])


def test_stateless_http_refusal_is_delivered_as_the_servers_error(modern_url):
    t, inbox = _transport(modern_url)
    try:
        t.send(jsonrpc.request(1, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {}}))
        legacy = inbox.get(timeout=5)  # a legacy request: troupe's synthetic error, as before
        assert legacy["error"]["code"] == jsonrpc.SERVER_UNAVAILABLE
        t.send(jsonrpc.request(2, "no/such", modern_client.envelope({})))
        refused = inbox.get(timeout=5)
        assert refused["id"] == 2 and refused["error"]["code"] == jsonrpc.METHOD_NOT_FOUND
        assert refused["error"]["data"]["httpStatus"] == 404
        t.send(jsonrpc.request(3, "server/discover", modern_client.envelope({})))
        found = inbox.get(timeout=5)
        assert modern_client.verdict(found["result"]) == modern_client.MODERN
    finally:
        t.close()


def test_stateless_http_cancel_closes_the_response_and_posts_nothing(modern_url):
    t, inbox = _transport(modern_url)
    t.set_protocol_version(modern_client.MODERN_VERSION)
    try:
        t.send(jsonrpc.request(1, "tools/call", modern_client.envelope({"name": "sleep",
                                                                         "arguments": {"seconds": 3}})))
        wait_until(lambda: 1 in t._calls, 5, message="call in flight")
        t.send(jsonrpc.notification("notifications/cancelled", {"requestId": 1}))
        wait_until(lambda: 1 not in t._calls, 2, message="response closed")
        assert "notifications/cancelled" not in _received(t, inbox, 2)
        with pytest.raises(gevent.queue.Empty):
            inbox.get(timeout=0.2)  # the cancelled call gets no answer from the transport
    finally:
        t.close()


@pytest.fixture
def runtime_for(tmp_path):
    started = []

    def make(servers):
        rt = Runtime(config.from_data({"servers": servers, "discovery": {"enabled": False}})).start()
        started.append(rt)
        return rt
    yield make
    for rt in started:
        rt.stop()
    pykka.ActorRegistry.stop_all()


def test_connection_speaks_modern_over_http_and_times_out_by_closing(runtime_for, modern_url):
    rt = runtime_for([{"name": "mh", "timeout": 1, "transport": {"type": "streamable-http",
                                                                  "streamable_http": {"url": modern_url}}}])
    wait_until(lambda: (v := rt.servers.current.get("mh")) is not None and v.state == "ready", 15, message="ready")
    status = next(s for s in rt.status()["servers"] if s["name"] == "mh")
    assert status["era"] == "modern" and status["server_info"]["name"] == "modern-only"
    answers: list = []
    rt.servers.current.get("mh").ref.tell(Forward("tools/call", {"name": "sleep", "arguments": {"seconds": 3}},
                                                  answers.append, timeout=0.5))
    wait_until(lambda: answers, 5, message="timeout answer")
    assert answers[0].code == jsonrpc.REQUEST_TIMEOUT
