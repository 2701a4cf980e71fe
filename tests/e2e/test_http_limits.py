"""troupe's HTTP front limits against a real process over real sockets: idle sessions expire, the
session cap evicts the least recently used idle session or answers 503, unfinished request heads
are cut after serve.header_timeout, and connections beyond serve.max_connections are refused
when no slow head can make room (tests/e2e/test_slowloris.py has the slow heads)."""
from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlsplit

import requests

from tests.support import wait_until
from tests.support.troupe import server

PROTOCOL = "2025-11-25"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "limits", "version": "1"}}}
JSON = {"Accept": "application/json", "Content-Type": "application/json"}
STREAM = {"Accept": "text/event-stream"}
CLOSE_MARGIN = 4.0  # seconds beyond header_timeout a cut connection may take (a loaded CI machine)
FLOOD = 2000  # initialize requests thrown at a troupe capped at 5 sessions


def _initialize(t, http=requests) -> str:
    resp = http.post(t.url, json=INIT, headers=JSON, timeout=10)
    assert resp.status_code == 200 and "result" in resp.json(), resp.text
    sid = resp.headers["Mcp-Session-Id"]
    note = http.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                     headers=_h(sid), timeout=10)
    assert note.status_code == 202
    return sid


def _h(sid: str) -> dict:
    return {**JSON, "Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}


def _ping(t, sid: str, http=requests) -> int:
    return http.post(t.url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=_h(sid), timeout=10).status_code


def _status(t) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _sessions(t) -> dict:
    return _status(t)["sessions"]


class Stream:
    """A held-open SSE response on its own connection (a bare requests.get(stream=True) closes its
    socket as soon as it returns: troupe rightly sees a hang-up)."""

    def __init__(self, url: str, headers: dict):
        self.http = requests.Session()
        self.resp = self.http.get(url, headers={**STREAM, **headers}, stream=True, timeout=10)
        assert self.resp.status_code == 200, self.resp.text
        self.lines = self.resp.iter_lines()

    def close(self) -> None:
        self.resp.close()
        self.http.close()


def _open_stream(t, sid: str) -> Stream:
    """A GET /mcp stream, read up to its opening comment (so troupe holds it open)."""
    stream = Stream(t.url, {"Mcp-Session-Id": sid})
    assert next(stream.lines).startswith(b": stream open")
    return stream


def _legacy_stream(t) -> tuple[Stream, str]:
    """A legacy /sse stream and the endpoint it names for POSTs."""
    stream = Stream(t.base + "/sse", {})
    assert next(stream.lines) == b"event: endpoint"
    return stream, next(stream.lines).decode()[len("data: "):]


def _address(t) -> tuple[str, int]:
    parts = urlsplit(t.base)
    return parts.hostname, parts.port


def _closed_within(sock: socket.socket, bound: float, trickle: bytes = b"") -> tuple[bytes, float]:
    """Wait until troupe closes `sock` (end of file or reset), sending `trickle` a byte at a time
    meanwhile; returns what troupe sent and how long it took. Fails past `bound`."""
    started, received = time.monotonic(), b""
    sock.settimeout(0.25)
    while time.monotonic() - started < bound:
        if trickle:
            try:
                sock.sendall(trickle[:1])
            except OSError:
                return received, time.monotonic() - started
            trickle = trickle[1:]
        try:
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:  # reset: closed as well
            return received, time.monotonic() - started
        if not chunk:
            return received, time.monotonic() - started
        received += chunk
    raise AssertionError(f"troupe kept the socket open for {bound}s; it sent {received[:200]!r}")


# ---------------------------------------------------------------- sessions


def test_idle_sessions_expire_and_their_id_gets_404(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", session_idle=1)
    idle, streaming = _initialize(t), _initialize(t)
    assert _sessions(t)["open"] == 2
    stream = _open_stream(t, streaming)
    try:
        # The session without a stream expires; the one holding a GET stream is busy and stays.
        wait_until(lambda: _sessions(t)["open"] == 1, 15, 0.1, "the idle session to expire")
        assert _ping(t, idle) == 404
        assert requests.get(t.url, headers={**STREAM, "Mcp-Session-Id": idle}, timeout=10).status_code == 404
        assert requests.delete(t.url, headers=_h(idle), timeout=10).status_code == 404
        assert _ping(t, streaming) == 200
    finally:
        stream.close()
    # Its stream closed, the other session is idle too, and expires in turn.
    wait_until(lambda: _sessions(t)["open"] == 0, 15, 0.1, "the formerly streaming session to expire")
    assert _ping(t, streaming) == 404
    assert _sessions(t)["expired"] == 2
    assert _ping(t, _initialize(t)) == 200  # a client that initializes again is served


def test_a_call_longer_than_session_idle_keeps_its_session(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", session_idle=1)
    sid = _initialize(t)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo__sleep",
                                                                           "arguments": {"seconds": 2.5}}}
    answer = requests.post(t.url, json=call, headers=_h(sid), timeout=30).json()
    assert answer["result"]["content"][0]["text"] == "slept", answer
    assert _ping(t, sid) == 200  # the idle clock started when the call was answered


def test_legacy_sse_session_ends_when_its_stream_closes(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    stream, endpoint = _legacy_stream(t)
    figures = _sessions(t)
    assert (figures["open"], figures["legacy"], figures["busy"]) == (1, 1, 1), figures
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert requests.post(t.base + endpoint, json=ping, headers=JSON, timeout=10).status_code == 202
    stream.close()
    wait_until(lambda: _sessions(t)["open"] == 0, 10, 0.05, "the legacy session to end with its stream")
    assert requests.post(t.base + endpoint, json=ping, headers=JSON, timeout=10).status_code == 404


def test_at_the_cap_the_least_recently_used_idle_session_is_closed(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", max_sessions=5)
    first, second, third, fourth, fifth = (_initialize(t) for _ in range(5))
    assert _ping(t, first) == 200  # `second` is now the least recently used…
    stream = _open_stream(t, second)  # …but busy with its GET stream, so `third` is the one to go
    try:
        sixth = _initialize(t)
        assert _ping(t, third) == 404
        assert [_ping(t, sid) for sid in (first, second, fourth, fifth, sixth)] == [200] * 5
        assert _sessions(t)["open"] == 5
        with requests.Session() as http:  # keep-alive, so the flood measures sessions, not sockets
            for _ in range(FLOOD):
                assert http.post(t.url, json=INIT, headers=JSON, timeout=10).status_code == 200
        figures = _sessions(t)
        assert figures["open"] == 5 and figures["max"] == 5 and figures["evicted"] == FLOOD + 1, figures
        assert _ping(t, second) == 200  # the streaming session outlived the flood
    finally:
        stream.close()


def test_when_every_session_is_busy_a_new_one_gets_503_with_retry_after(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", max_sessions=5)
    sids = [_initialize(t) for _ in range(5)]
    answers: dict[str, dict] = {}

    def slow_call(sid: str) -> None:
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "echo__sleep", "arguments": {"seconds": 60}}}
        answers[sid] = requests.post(t.url, json=call, headers=_h(sid), timeout=30).json()
    callers = [threading.Thread(target=slow_call, args=(sid,)) for sid in sids]
    for caller in callers:
        caller.start()
    try:
        wait_until(lambda: _sessions(t)["busy"] == 5, 20, message="five busy sessions")
        refused = requests.post(t.url, json=INIT, headers=JSON, timeout=10)
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) > 0
        assert refused.json()["error"]["code"] == -32000 and "serve.max_sessions" in refused.json()["error"]["message"]
        legacy = requests.get(t.base + "/sse", headers=STREAM, timeout=10)
        assert legacy.status_code == 503 and int(legacy.headers["Retry-After"]) > 0
        figures = _sessions(t)
        assert figures["open"] == 5 and figures["refused"] == 2 and figures["evicted"] == 0, figures
        # One client leaves: its call is answered at once, and a new client gets its place.
        assert requests.delete(t.url, headers=_h(sids[0]), timeout=10).status_code == 200
        assert _ping(t, _initialize(t)) == 200
    finally:
        for sid in sids[1:]:
            requests.delete(t.url, headers=_h(sid), timeout=10)
        for caller in callers:
            caller.join(timeout=20)
    assert not any(caller.is_alive() for caller in callers)
    assert all("session closed" in answers[sid]["error"]["message"] for sid in sids)


# ---------------------------------------------------------------- sockets


def test_unfinished_requests_are_cut_after_header_timeout(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", header_timeout=1)
    address = _address(t)
    # A legacy SSE stream opened first must outlive every cut below: the deadline covers heads only.
    stream, endpoint = _legacy_stream(t)
    try:
        with socket.create_connection(address) as partial:
            partial.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1")  # no final CRLFs
            sent, took = _closed_within(partial, 1 + CLOSE_MARGIN)
            assert sent == b"" and took >= 0.5, (sent, took)
        with socket.create_connection(address) as silent:  # connects and never sends a byte
            _closed_within(silent, 1 + CLOSE_MARGIN)
        with socket.create_connection(address) as trickler:  # a byte every 0.25 s does not extend the deadline
            _, took = _closed_within(trickler, 1 + CLOSE_MARGIN,
                                     trickle=b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 100)
            assert took < 1 + CLOSE_MARGIN
        with socket.create_connection(address) as stalled:  # a whole head, then a body that stops
            stalled.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 100\r\n\r\n{\"jsonrpc\": " % address[1])
            sent, took = _closed_within(stalled, 1 + CLOSE_MARGIN)
            assert sent.startswith(b"HTTP/1.1 408 "), sent
        # Seconds past the deadline the stream is still served: an answer comes on it.
        ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
        assert requests.post(t.base + endpoint, json=ping, headers=JSON, timeout=10).status_code == 202
        data = next(line for line in stream.lines if line.startswith(b"data: "))
        assert b'"id":5' in data and b'"result"' in data
    finally:
        stream.close()
    assert requests.get(t.base + "/status", timeout=10).status_code == 200  # a whole request is served


def test_connections_beyond_max_connections_are_refused_until_some_close(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", max_connections=4, header_timeout=30)
    address = _address(t)
    # Only the asking connection is open before the four are taken.
    wait_until(lambda: _status(t)["connections"]["open"] == 1, 10, 0.05, "earlier connections to close")
    held = [socket.create_connection(address) for _ in range(4)]
    try:
        for sock in held:  # whole heads, bodies still coming: busy, so no slow head to cut for the fifth
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 100\r\n\r\n{" % address[1])
        with socket.create_connection(address) as fifth:
            fifth.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            sent, _ = _closed_within(fifth, 5)
            assert sent.startswith(b"HTTP/1.1 503 ") and b"Retry-After: " in sent, sent
            assert b'"servers"' not in sent  # refused, not served
    finally:
        for sock in held:
            sock.close()

    def served():
        try:
            return requests.get(t.base + "/status", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False
    wait_until(served, 10, 0.05, "service to resume once the held connections close")
    figures = _status(t)["connections"]
    assert figures["max"] == 4 and figures["refused"] >= 1, figures
