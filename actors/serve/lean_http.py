"""troupe's lean HTTP/1.1 server for its WSGI app: gevent's StreamServer, httptools' parser.

It replaces pywsgi for troupe's own front (issue 20): pywsgi parsed every head with email.parser
and started a Timeout per request, over half the HTTP front's time per call. Hosts that embed
troupe's WSGI app keep their own server (pywsgi's FrontHandler in listener.py still serves them).

Kept from the pywsgi front: a deadline on each request head (an idle keep-alive connection too)
and a timeout on each pause in a body; keep-alive and pipelining; HTTP/1.0 answers closed unless
it asks for keep-alive; chunked streaming, each chunk written when the app yields it; HEAD;
`Expect: 100-continue`; 400 for a malformed request; the 503 past `max_connections`, unless a
slow request head can be cut to make room (head_gate.py); the connection's socket in the
environ for hang-up watches.
"""
from __future__ import annotations

import socket
import time

import gevent
from gevent.pool import Pool
from gevent.server import StreamServer
from httptools import HttpParserError
from loguru import logger

from actors.serve.head_gate import HeadGate
from actors.serve.lean_request import MAX_HEAD_BYTES, Request, RequestParser
from actors.serve.listener import _linger, _never_full, _refuse
from actors.serve.stream_buffer import SOCKET_KEY

RECV_BYTES = 64 * 1024
DRAIN_LIMIT = 64 * 1024  # an unread body up to this is read and dropped to keep the connection
_NO_BODY_STATUS = (b"1", b"204", b"304")
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_END_CHUNK = b"0\r\n\r\n"


def _plain(status: bytes, text: bytes) -> bytes:
    return (b"HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\n"
            b"Connection: close\r\n\r\n%s" % (status, len(text), text))


_BAD_REQUEST = _plain(b"400 Bad Request", b"malformed HTTP request")
_HEAD_TOO_LARGE = _plain(b"431 Request Header Fields Too Large", b"request head too large")
_SERVER_ERROR = _plain(b"500 Internal Server Error", b"internal server error")


class _Date:
    """The Date header, formatted once a second rather than once a request."""

    second = -1
    line = b""

    @classmethod
    def header(cls) -> bytes:
        now = int(time.time())
        if now != cls.second:
            cls.line = b"Date: " + time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now)).encode() + b"\r\n"
            cls.second = now
        return cls.line


class LeanServer(StreamServer):
    """Serves a WSGI app over HTTP/1.1, at most `max_connections` connections at once.

    One connection more closes the connection that has waited longest for a request head past
    a short grace (its HeadGate), or, when none has, gets a 503 and is closed at once (as with
    the pywsgi front): gevent's own pool would stop accepting instead, leaving clients in the
    backlog while SSE streams hold slots. The pool itself is unbounded: the gate counts.
    """

    pool: Pool

    def __init__(self, listener, application, *, max_connections: int, header_timeout: float):
        self.application = application
        self.header_timeout = header_timeout
        self.max_connections = max_connections
        self.gate = HeadGate(max_connections, header_timeout)
        super().__init__(listener, self._serve_connection, spawn=Pool(None))
        self.full = _never_full  # keep accepting; do_handle refuses what the gate cannot take

    def do_handle(self, *args):
        if not self.gate.admit(len(self.pool)):
            gevent.spawn(_refuse, args[0])
            return
        super().do_handle(*args)

    def figures(self) -> dict:
        """The `connections` figure of GET /status."""
        return self.gate.figures(len(self.pool))

    def _serve_connection(self, sock, address) -> None:
        try:
            # Without TCP_NODELAY every keep-alive request waited ~44 ms for a delayed ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        connection = Connection(self, sock, address)
        try:
            connection.run()
            if connection.peer_open and not connection.head_cut:
                _linger(sock)
        except OSError:  # the client went away mid-answer: nothing to tell it
            pass
        finally:
            self.gate.ended(connection)
            sock.close()


class Connection:
    """One client connection: reads requests, calls the app for each, writes its answers."""

    __slots__ = ("server", "sock", "address", "parser", "limit", "open", "peer_open", "head_cut", "_base")

    def __init__(self, server: LeanServer, sock, address) -> None:
        self.server, self.sock, self.address = server, sock, address
        self.parser = RequestParser()
        self.limit = server.header_timeout
        self.open = True  # False once the client closed its side or the connection must end
        self.peer_open = True  # False once the client closed its side
        self.head_cut = False  # True once the gate closed it for a slow head
        host, port = server.address[:2]
        self._base = {
            "SCRIPT_NAME": "", "SERVER_NAME": str(host), "SERVER_PORT": str(server.server_port or port),
            "REMOTE_ADDR": str(address[0]) if address else "", "REMOTE_PORT": str(address[1]) if address else "",
            "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.multithread": False,
            "wsgi.multiprocess": False, "wsgi.run_once": False, SOCKET_KEY: sock}

    def run(self) -> None:
        while self.open:
            request = self._next_head()
            if request is None:
                return
            keep = self._answer(request)
            self.parser.requests.popleft()
            if not keep or not self._finish_body(request):
                return

    def recv(self, timeout: float) -> bool:
        """Read once more into the parser, waiting at most `timeout`; False at end of input.
        Raises TimeoutError and HttpParserError."""
        self.sock.settimeout(timeout)
        data = self.sock.recv(RECV_BYTES)
        if not data:
            self.open = self.peer_open = False
            return False
        self.parser.feed(data)
        return True

    def cut_head(self) -> None:
        """The gate needs this slot: the pending read ends at once (end of input) and so does the
        connection. Called from the accept callback: never blocks."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # gone already
            pass

    def _next_head(self) -> Request | None:
        """The next request with a complete head, or None (the connection then closes). One
        deadline for the whole head, not a timeout per read: a client sending a byte a second
        would keep resetting that. While it waits, the gate may cut it to make room."""
        queue = self.parser.requests
        if queue and queue[0].head_done and not self.parser.oversized:
            return queue[0]  # pipelined: already here
        gate = self.server.gate
        gate.waiting(self)
        try:
            deadline = time.monotonic() + self.limit
            while not (queue and queue[0].head_done) or self.parser.oversized:
                left = deadline - time.monotonic()
                try:
                    if left <= 0 or not self.recv(left):
                        return None  # no complete request was made: close without an answer
                except TimeoutError:
                    return None
                except HttpParserError:
                    self._send_quietly(_BAD_REQUEST)
                    return None
                if self.parser.head_too_large(MAX_HEAD_BYTES + RECV_BYTES):
                    self._send_quietly(_HEAD_TOO_LARGE)
                    return None
            return queue[0]
        finally:
            gate.done(self)

    def _answer(self, request: Request) -> bool:
        """Call the app and write its answer; True when the connection may serve another request."""
        path, query = request.target()
        environ = {**self._base, **request.headers, "REQUEST_METHOD": request.method, "PATH_INFO": path,
                   "QUERY_STRING": query, "SERVER_PROTOCOL": "HTTP/" + request.version,
                   "wsgi.input": BodyReader(self, request), "wsgi.errors": _ErrorStream}
        response = Response(self, request)
        try:
            result = self.server.application(environ, response.start)
        except Exception:
            logger.exception("HTTP app failed")
            self._send_quietly(_SERVER_ERROR)
            return False
        try:
            response.send(result)
        except OSError:
            return False
        except Exception:
            logger.exception("HTTP answer failed")
            if not response.head_sent:
                self._send_quietly(_SERVER_ERROR)
            return False
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                try:
                    close()  # a stream's cleanup (unsubscribe, hang-up watch) runs now
                except Exception:  # the connection still ends cleanly
                    logger.exception("HTTP answer's close failed")
        return response.keep_alive and self.open

    def _finish_body(self, request: Request) -> bool:
        """Read and drop what the app left unread of a small body, so the connection can serve the
        next request; False (close) for a large one or one that stops."""
        dropped = len(request.body)
        while not request.complete:
            if dropped > DRAIN_LIMIT:
                return False
            try:
                if not self.recv(self.limit):
                    return False
            except (TimeoutError, HttpParserError):
                return False
            dropped += len(request.body)
            request.body.clear()
        return True

    def _send_quietly(self, data: bytes) -> None:
        self.open = False
        try:
            self.sock.settimeout(self.limit)
            self.sock.sendall(data)
        except OSError:
            pass


class BodyReader:
    """The request body as `wsgi.input`: read from the socket as the app asks for it, each pause
    bounded by the header timeout (TimeoutError, which the app answers with a 408)."""

    __slots__ = ("_conn", "_request", "_continued")

    def __init__(self, conn: Connection, request: Request) -> None:
        self._conn, self._request, self._continued = conn, request, False

    def read(self, size: int | None = -1) -> bytes:
        request, body = self._request, self._request.body
        want = None if size is None or size < 0 else size
        while not request.complete and (want is None or len(body) < want):
            self._continue()
            try:
                if not self._conn.recv(self._conn.limit):
                    break  # the client closed: what came is all there is
            except HttpParserError:
                self._conn.open = False
                break
        end = len(body) if want is None else min(want, len(body))
        data = bytes(body[:end])
        del body[:end]
        return data

    def readline(self, size: int | None = -1) -> bytes:
        line = bytearray()
        while size is None or size < 0 or len(line) < size:
            byte = self.read(1)
            if not byte:
                break
            line += byte
            if byte == b"\n":
                break
        return bytes(line)

    def readlines(self, hint: int = -1) -> list[bytes]:
        return list(iter(self.readline, b""))

    def __iter__(self):
        return iter(self.readline, b"")

    def _continue(self) -> None:
        # A client sending `Expect: 100-continue` waits for this before its body.
        if not self._continued:
            self._continued = True
            if self._request.headers.get("HTTP_EXPECT", "").lower() == "100-continue" and \
                    self._request.version == "1.1" and not self._request.body:
                self._conn.sock.settimeout(None)
                self._conn.sock.sendall(_CONTINUE)


class Response:
    """Writes one answer: whole bodies with a Content-Length in one write, streams chunked (or,
    for HTTP/1.0, raw until the connection closes), each chunk as soon as the app yields it."""

    __slots__ = ("_conn", "_request", "status", "headers", "head_sent", "keep_alive", "_chunked", "_no_body")

    def __init__(self, conn: Connection, request: Request) -> None:
        self._conn, self._request = conn, request
        self.status = b""
        self.headers: list[tuple[str, str]] = []
        self.head_sent = False
        self.keep_alive = request.keep_alive
        self._chunked = False
        self._no_body = request.method == "HEAD"

    def start(self, status: str, headers: list[tuple[str, str]], exc_info=None):
        if exc_info is not None and self.head_sent:
            raise exc_info[1].with_traceback(exc_info[2])
        self.status, self.headers = status.encode("latin-1"), headers
        return self._write

    def send(self, result) -> None:
        if not self.head_sent and isinstance(result, list) and len(result) <= 1:  # the usual answer: one write
            self._whole(result[0] if result else b"")
            return
        for data in result:
            if data:
                self._write(data)
        if not self.head_sent:
            self._whole(b"")
        elif self._chunked:
            self._conn.sock.sendall(_END_CHUNK)

    def _whole(self, body: bytes) -> None:
        head = self._head(len(body))
        self._conn.sock.settimeout(None)  # an answer may take long to be read
        self._conn.sock.sendall(head if self._no_body or not body else head + body)

    def _write(self, data: bytes) -> None:
        if not self.head_sent:
            head = self._head(None)
            self._conn.sock.settimeout(None)  # a stream lasts
        else:
            head = b""
        if self._no_body:
            if head:
                self._conn.sock.sendall(head)
            return
        if self._chunked:
            data = b"%x\r\n%s\r\n" % (len(data), data)
        self._conn.sock.sendall(head + data if head else data)

    def _head(self, length: int | None) -> bytes:
        """The status line and headers; `length` is the body's when known whole."""
        self.head_sent = True
        lines = [b"HTTP/1.1 ", self.status, b"\r\n"]
        has_length = has_date = has_connection = False
        for name, value in self.headers:
            lower = name.lower()
            if lower == "content-length":
                has_length = True
            elif lower == "date":
                has_date = True
            elif lower == "connection":
                has_connection = True
                self.keep_alive = self.keep_alive and value.strip().lower() != "close"
            lines.append(b"%s: %s\r\n" % (name.encode("latin-1"), value.encode("latin-1")))
        if not has_date:
            lines.append(_Date.header())
        bodyless = self.status[:3] in _NO_BODY_STATUS or self.status[:1] == b"1"
        if not has_length and not bodyless:
            if length is not None:
                lines.append(b"Content-Length: %d\r\n" % length)
            elif self._request.version == "1.1":
                self._chunked = not self._no_body
                if self._no_body:
                    self.keep_alive = False  # a HEAD of a stream: its length is unknowable
                else:
                    lines.append(b"Transfer-Encoding: chunked\r\n")
            else:
                self.keep_alive = False  # HTTP/1.0: the body ends when the connection does
        if has_connection:
            pass  # the app said it
        elif not self.keep_alive:
            lines.append(b"Connection: close\r\n")
        elif self._request.version == "1.0":
            lines.append(b"Connection: keep-alive\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)


class _ErrorStream:
    """`wsgi.errors`: what an app writes there goes to the debug log."""

    @staticmethod
    def write(text: str) -> None:
        if text.strip():
            logger.debug("http: {}", text.strip()[:500])

    @staticmethod
    def flush() -> None:
        pass

    @staticmethod
    def writelines(lines) -> None:
        for line in lines:
            _ErrorStream.write(line)
