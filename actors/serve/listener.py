"""troupe's pywsgi server: TCP_NODELAY, a deadline for every request head, a cap on open
connections (slow heads cut first, head_gate.py)."""
from __future__ import annotations

import socket
import time

import gevent
import gevent.socket
from gevent.pool import Pool
from gevent.pywsgi import WSGIHandler, WSGIServer

from actors.serve.head_gate import HeadGate
from actors.serve.stream_buffer import SOCKET_KEY
from actors.settings.config import DEFAULT_HEADER_TIMEOUT_S

REFUSE_LINGER_S = 1.0  # a refused connection is closed after its 503 at most this late
REFUSED_RETRY_AFTER_S = 1
_REFUSED_TEXT = b"troupe: too many open connections; retry later"
_REFUSAL = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
            b"Retry-After: %d\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"
            % (REFUSED_RETRY_AFTER_S, len(_REFUSED_TEXT), _REFUSED_TEXT))


class FrontHandler(WSGIHandler):
    """pywsgi handler with TCP_NODELAY and time limits on what a client sends; hosts embedding
    troupe can serve with it too (the limit is their server's `header_timeout`, else the default).

    The request head (line and headers) has a deadline, from when the connection starts waiting
    for it until the headers are parsed, so an idle keep-alive connection is closed after it as
    well. In the body, a pause as long ends the request. Answers and streams have no limit.
    """

    _head_timer: gevent.Timeout | None = None
    head_cut = False  # True once a FrontServer's gate closed it for a slow head

    def handle(self):
        # Without TCP_NODELAY every keep-alive request waited ~44 ms for a delayed ACK.
        try:
            self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        try:
            return super().handle()
        finally:
            gate = self._gate()
            if gate is not None:
                gate.ended(self)

    def cut_head(self) -> None:
        """The gate needs this slot: the pending read of the head ends (end of input), and with it
        the connection. Called from the accept callback: never blocks."""
        try:
            self.socket.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):  # gone already
            pass

    def handle_one_request(self):
        # One deadline for the whole head, not a socket timeout: that counts per read, and a client
        # sending a byte a second would keep resetting it. get_environ cancels it once the head is
        # parsed; the body then gets a socket timeout per pause, and the answer no limit at all.
        if self.socket is not None:
            self.socket.settimeout(None)  # the deadline alone governs the head
        timer = self._head_timer = gevent.Timeout(self._limit())
        timer.start()
        gate = self._gate()
        if gate is not None:
            gate.waiting(self)
        try:
            return super().handle_one_request()
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            return None  # close without an answer: no complete request was made
        finally:
            timer.close()
            if gate is not None:
                gate.done(self)

    def get_environ(self):
        if self._head_timer is not None:
            self._head_timer.cancel()
        gate = self._gate()
        if gate is not None:
            gate.done(self)
        # The body is read by the app, after this: a socket timeout bounds each pause in it.
        self.socket.settimeout(self._limit())
        environ = super().get_environ()
        environ[SOCKET_KEY] = self.socket
        return environ

    def start_response(self, status, headers, exc_info=None):
        self.socket.settimeout(None)  # an answer may take long to be read, and a stream lasts
        return super().start_response(status, headers, exc_info)

    def run_application(self):
        try:
            super().run_application()
        finally:
            # pywsgi then discards any body the app left unread: bounded the same way.
            if self.socket is not None:
                self.socket.settimeout(self._limit())

    def log_request(self):
        # pywsgi formats an access-log line for every request even with no log to write it to
        # (troupe passes log=None): a few µs of every call (issue 20).
        if getattr(self.server, "access_log", True):
            super().log_request()

    def _limit(self) -> float:
        return getattr(self.server, "header_timeout", DEFAULT_HEADER_TIMEOUT_S)

    def _gate(self) -> HeadGate | None:
        """A FrontServer's gate; None under a host's own WSGIServer."""
        return getattr(self.server, "gate", None)


class FrontServer(WSGIServer):
    """pywsgi serving at most `max_connections` connections at once.

    One connection more closes the connection that has waited longest for a request head past a
    short grace (its HeadGate), or, when none has, gets a 503 and is closed at once. gevent's own
    pool would stop accepting instead, leaving new clients unanswered in the listen backlog until
    a slot frees, which, with SSE streams holding slots, may be never.
    """

    pool: Pool  # always set: __init__ passes spawn=Pool(None); the gate counts

    def __init__(self, listener, application, *, max_connections: int, header_timeout: float, **kwargs):
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.access_log = kwargs.get("log", "default") is not None  # log=None: no access log at all
        self.gate = HeadGate(max_connections, header_timeout)
        super().__init__(listener, application, spawn=Pool(None), handler_class=FrontHandler, **kwargs)
        self.full = _never_full  # keep accepting; do_handle refuses what the gate cannot take

    def do_handle(self, sock, address):
        if not self.gate.admit(len(self.pool)):
            gevent.spawn(_refuse, sock)
            return
        super().do_handle(sock, address)

    def figures(self) -> dict:
        """The `connections` figure of GET /status."""
        return self.gate.figures(len(self.pool))


def _never_full() -> bool:
    return False


def _refuse(sock) -> None:
    try:
        with gevent.Timeout(REFUSE_LINGER_S, False):  # pyright: ignore[reportArgumentType]  # stubs lack documented False
            sock.sendall(_REFUSAL)
            sock.shutdown(socket.SHUT_WR)
            # Read what the client sent before closing: closing with unread data sends a reset,
            # which can destroy the 503 before the client reads it.
            while sock.recv(4096):
                pass
    except OSError:
        pass
    finally:
        sock.close()


def _linger(sock) -> None:
    """Close our side, then read what the client still sends for at most REFUSE_LINGER_S: closing
    with unread input sends a reset, which can destroy the answer (a 413, a 400) before the
    client reads it."""
    deadline = time.monotonic() + REFUSE_LINGER_S
    sock.shutdown(socket.SHUT_WR)
    try:
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(65536):
                return
    except TimeoutError:
        pass


def watch_hangup(environ, on_hangup) -> gevent.Greenlet | None:
    """Call `on_hangup` when the client of a streamed response goes away; kill the result when the
    stream ends first. None when a host's own server serves us: then a hang-up shows only when a
    keep-alive write fails."""
    sock = environ.get(SOCKET_KEY)
    return None if sock is None else gevent.spawn(_wait_hangup, sock, on_hangup)


def _wait_hangup(sock, on_hangup) -> None:
    try:
        # The client sends nothing more on a streamed response: readable means end of file (or a
        # request pipelined behind a stream that never ends, which cannot be served either).
        gevent.socket.wait_read(sock.fileno())
    except (OSError, ValueError):  # the socket was closed under us: the stream is over anyway
        pass
    on_hangup()
