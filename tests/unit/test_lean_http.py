"""The lean HTTP/1.1 server (actors/serve/lean_http.py) against real sockets.

The server runs in a thread of its own with its own gevent hub; the tests are its clients with
plain blocking sockets, so they need no monkey patching and can poll with wait_until.
"""
from __future__ import annotations

import socket
import threading
import time

import gevent
import gevent.event
import pytest

from actors.serve.lean_http import LeanServer
from actors.serve.listener import SOCKET_KEY, FrontServer
from tests.support import wait_until

BODY_CAP = 1000


def _app(released: list):
    """A small WSGI app: /echo answers with the body, /capped refuses bodies over BODY_CAP as
    troupe's MCP routes do, /stream yields one chunk, then the rest once /release is asked."""
    def app(environ, start_response):
        path = environ["PATH_INFO"]
        if path == "/echo":
            try:
                body = environ["wsgi.input"].read()
            except TimeoutError:
                start_response("408 Request Timeout", [("Connection", "close")])
                return [b"stopped"]
            start_response("200 OK", [("Content-Type", "text/plain"), ("X-Socket", str(SOCKET_KEY in environ)),
                                      ("X-Name", "[%s]" % environ.get("HTTP_X_NAME", ""))])
            return [body]
        if path == "/capped":
            body = environ["wsgi.input"].read(BODY_CAP + 1)
            released.append(len(body))
            start_response("413 Payload Too Large" if len(body) > BODY_CAP else "200 OK", [])
            return [b"too large" if len(body) > BODY_CAP else b"ok"]
        if path == "/release":
            released[0].set()
            start_response("200 OK", [])
            return [b"released"]
        if path == "/stream":
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return _stream(released[0])
        start_response("404 Not Found", [])
        return [b"no route"]
    return app


def _stream(release: gevent.event.Event):
    yield b"first"
    yield b""  # an empty chunk must not end the chunked body
    release.wait(10)
    yield b"second"


class ServerThread:
    """A LeanServer on a free loopback port, served in its own thread and hub until stop()."""

    def __init__(self, max_connections: int = 10, header_timeout: float = 5.0, make=LeanServer) -> None:
        self.ready = threading.Event()
        self.kwargs = {"max_connections": max_connections, "header_timeout": header_timeout}
        self.make = make
        self.bodies: list = []
        self.server: LeanServer | FrontServer | None = None
        self._stop_signal = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert self.ready.wait(10), "the server did not start"

    def _run(self) -> None:
        self.bodies.append(gevent.event.Event())
        stopped = gevent.event.Event()
        self._stop_signal = gevent.get_hub().loop.async_()
        self._stop_signal.start(stopped.set)
        self.server = self.make(("127.0.0.1", 0), _app(self.bodies), **self.kwargs)
        self.server.start()
        self.ready.set()
        stopped.wait()
        self.server.stop(timeout=1)

    @property
    def address(self) -> tuple[str, int]:
        assert self.server is not None and self.server.server_port is not None
        return "127.0.0.1", self.server.server_port

    def connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=10)
        return sock

    def stop(self) -> None:
        assert self._stop_signal is not None
        self._stop_signal.send()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def serve():
    started: list[ServerThread] = []

    def start(**kwargs) -> ServerThread:
        started.append(ServerThread(**kwargs))
        return started[-1]
    yield start
    for server in started:
        server.stop()


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def _read_response(sock: socket.socket, pending: bytes = b"") -> tuple[bytes, bytes, bytes]:
    """One Content-Length response: (head, body, bytes after it)."""
    data = pending
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole head: {data!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed in the body"
        rest += chunk
    return head, rest[:length], rest[length:]


def test_a_malformed_request_gets_400_and_the_connection_closes(serve):
    server = serve()
    with server.connect() as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in answer, answer
    with server.connect() as sock:  # the server is still serving
        sock.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_response(sock)[0].startswith(b"HTTP/1.1 404 ")


def test_an_unfinished_head_is_cut_at_the_deadline_even_when_trickled(serve):
    server = serve(header_timeout=0.5)
    with server.connect() as sock:
        started = time.monotonic()
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n")
        for _ in range(3):  # trickled bytes do not extend the head's deadline
            sock.sendall(b"X-Slow: a\r\n")
        answer = _read_until_closed(sock)
        took = time.monotonic() - started
    assert answer == b"" and 0.4 <= took < 3, (answer, took)


def test_an_idle_keep_alive_connection_is_closed_after_the_deadline(serve):
    server = serve(header_timeout=0.5)
    with server.connect() as sock:
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        head, _, rest = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 200 ") and rest == b""
        started = time.monotonic()
        assert _read_until_closed(sock) == b""
        assert time.monotonic() - started < 3


def test_a_body_that_stops_gets_408(serve):
    server = serve(header_timeout=0.5)
    with server.connect() as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ") and answer.endswith(b"stopped"), answer


def test_a_body_over_the_cap_is_read_only_to_the_cap_and_its_connection_closed(serve):
    server = serve()
    chunk = b"x" * 4096
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(256)) + b"0\r\n\r\n"  # 1 MiB chunked
    with server.connect() as sock:
        sock.sendall(b"POST /capped HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        try:
            sock.sendall(body)
        except OSError:  # the server may close before taking it all
            pass
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 413 ") and answer.endswith(b"too large"), answer
    assert server.bodies[1:] == [BODY_CAP + 1]


def test_a_head_too_large_gets_431(serve):
    server = serve()
    with server.connect() as sock:
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n" + b"X-Big: " + b"a" * 70000 + b"\r\n\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]


def test_keep_alive_serves_two_requests_on_one_socket_and_pipelined_ones_in_order(serve):
    server = serve()
    with server.connect() as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nX-Name:  padded \t\r\nContent-Length: 3\r\n\r\none")
        head, body, rest = _read_response(sock)
        assert head.startswith(b"HTTP/1.1 200 ") and body == b"one" and b"X-Socket: True" in head
        assert b"X-Name: [padded]" in head, head  # whitespace around a value is not part of it
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\ntwo"
                     b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nthree")
        _, second, rest = _read_response(sock, rest)
        _, third, rest = _read_response(sock, rest)
        assert (second, third, rest) == (b"two", b"three", b"")
        assert server.server is not None and server.server.figures()["open"] == 1


def test_a_stream_is_sent_chunked_and_each_chunk_at_once(serve):
    server = serve()
    with server.connect() as sock:
        sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        data = b""
        while b"5\r\nfirst\r\n" not in data:  # the stream is blocked until /release: this chunk came alone
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        assert b"Transfer-Encoding: chunked" in data and b"Content-Length" not in data, data
        with server.connect() as other:
            other.sendall(b"GET /release HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _read_response(other)[1] == b"released"
        while not data.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        assert data.endswith(b"6\r\nsecond\r\n0\r\n\r\n"), data
        sock.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")  # the connection is kept after the stream
        assert _read_response(sock)[0].startswith(b"HTTP/1.1 200 ")


def test_http_1_0_is_closed_after_its_answer_and_head_has_no_body(serve):
    server = serve()
    with server.connect() as sock:
        sock.sendall(b"GET /nothing HTTP/1.0\r\n\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 404 ") and b"Connection: close" in answer and answer.endswith(b"no route")
    with server.connect() as sock:
        sock.sendall(b"HEAD /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(65536)
        assert b"Content-Length: 8" in head and head.endswith(b"\r\n\r\n"), head
        sock.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # No body came after the HEAD's head: the next bytes are the GET's answer.
        answer = _read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 404 ") and answer.endswith(b"no route"), answer


def test_expect_100_continue_is_answered_before_the_body(serve):
    server = serve()
    with server.connect() as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        assert data == b"HTTP/1.1 100 Continue\r\n\r\n", data
        sock.sendall(b"body")
        assert _read_response(sock)[1] == b"body"


def _pywsgi(listener, app, **kwargs) -> FrontServer:
    return FrontServer(listener, app, log=None, **kwargs)


SERVERS = pytest.mark.parametrize("make", [LeanServer, _pywsgi], ids=["lean", "pywsgi"])
_BUSY = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf"  # a whole head, half a body


@SERVERS
def test_connections_beyond_the_maximum_get_503_when_every_head_is_whole(serve, make):
    server = serve(max_connections=2, header_timeout=30, make=make)
    held = [server.connect() for _ in range(2)]
    try:
        for sock in held:
            sock.sendall(_BUSY)  # busy reading its body: no slow head to cut, however long it takes
        assert server.server is not None
        wait_until(lambda: server.server.figures()["open"] == 2 and server.server.figures()["waiting_for_head"] == 0,
                   10, message="two busy connections")
        with server.connect() as third:
            third.sendall(b"GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = _read_until_closed(third)
        assert answer.startswith(b"HTTP/1.1 503 ") and b"Retry-After: " in answer, answer
        assert server.server.figures()["refused"] == 1 and server.server.figures()["slow_heads_cut"] == 0
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: server.server.figures()["open"] == 0, 10, message="held connections to close")
    with server.connect() as fourth:
        fourth.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_response(fourth)[0].startswith(b"HTTP/1.1 404 ")


def _served(server: ServerThread) -> bool:
    """One GET on a new connection: True if answered, False if refused with 503."""
    with server.connect() as sock:
        sock.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        answer = _read_until_closed(sock)
    assert answer.startswith((b"HTTP/1.1 404 ", b"HTTP/1.1 503 ")), answer
    return answer.startswith(b"HTTP/1.1 404 ")


@SERVERS
def test_at_the_maximum_the_oldest_slow_head_makes_room_for_a_newcomer(serve, make):
    server = serve(max_connections=3, header_timeout=30, make=make)
    slower = server.connect()  # waits for its head first, so goes first
    assert server.server is not None
    wait_until(lambda: server.server.figures()["waiting_for_head"] == 1, 10, message="slower waiting")
    slow, busy = server.connect(), server.connect()
    try:
        slower.sendall(b"GET /echo HTTP/1.1\r\nHost: x")  # no end of head
        slow.sendall(b"GET /echo HTTP/1.1\r\n")
        busy.sendall(_BUSY)
        wait_until(lambda: server.server.figures()["open"] == 3 and server.server.figures()["waiting_for_head"] == 2,
                   10, message="two slow heads and a busy connection")
        # Within the grace the newcomer is refused; past it, the slow head waiting longest gives way.
        wait_until(lambda: _served(server), 10, 0.1, "a newcomer served at the maximum")
        slower.settimeout(10)
        assert _read_until_closed(slower) == b""  # cut without an answer
        figures = server.server.figures()
        assert figures["slow_heads_cut"] == 1 and figures["waiting_for_head"] == 1, figures
        busy.sendall(b"tail!!")  # its body completes: answered
        assert _read_response(busy)[1] == b"halftail!!"
        slow.sendall(b"Host: x\r\n\r\n")  # the younger slow head was left alone
        assert _read_response(slow)[1] == b""
    finally:
        for sock in (slow, slower, busy):
            sock.close()


def test_a_large_body_in_the_read_that_ends_a_head_is_not_counted_as_head():
    from actors.serve.lean_request import MAX_HEAD_BYTES, RequestParser
    head = b"POST /mcp HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + b"j" * 2000 + b"\r\nContent-Length: 200000\r\n\r\n"
    data = head + b"b" * 200000
    loose = MAX_HEAD_BYTES + 64 * 1024
    parser = RequestParser()
    parser.feed(data[:1460])  # a network's first segment: part of the head
    assert not parser.head_too_large(loose)
    parser.feed(data[1460:1460 + 65536])  # the rest of the head and 64 KiB of body in one read
    assert not parser.head_too_large(loose) and parser.requests[0].head_done
    unfinished = RequestParser()
    unfinished.feed(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
    for _ in range(3):  # one header that never ends, the parser buffering it: refused past the loose cap
        unfinished.feed(b"a" * 60000)
    assert unfinished.head_too_large(loose)
