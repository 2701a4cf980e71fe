"""The request side of troupe's lean HTTP/1.1 server: httptools parses, this keeps what it found.

httptools (llhttp) parses request heads and bodies, chunked or not, in C; the callbacks below only
collect. A client may pipeline: one recv can hold the end of one request and the start of the
next, so parsed requests queue up in order and each keeps its own body.
"""
from __future__ import annotations

from collections import deque
from urllib.parse import unquote

import httptools

MAX_HEAD_BYTES = 64 * 1024  # a request line and headers beyond this are refused (431)
_ENVIRON_KEYS: dict[bytes, str | None] = {b"content-type": "CONTENT_TYPE", b"content-length": "CONTENT_LENGTH"}


def environ_key(name: bytes) -> str | None:
    """The WSGI environ key of a header name; None for a name with an underscore, dropped as pywsgi
    does, because `X_Token` and `X-Token` would otherwise both become HTTP_X_TOKEN (a spoof)."""
    key = _ENVIRON_KEYS.get(name)
    if key is None and name not in _ENVIRON_KEYS:
        text = name.decode("latin-1")
        key = None if "_" in text else "HTTP_" + text.upper().replace("-", "_")
        if len(_ENVIRON_KEYS) < 512:  # the names clients send are few; a flood of new ones is not cached
            _ENVIRON_KEYS[name] = key
    return key


class Request:
    """One parsed request: its head once `head_done`, its body as it arrives, `complete` at its end."""

    __slots__ = ("method", "url", "headers", "version", "keep_alive", "upgrade", "body", "complete",
                 "head_done")

    def __init__(self) -> None:
        self.method = "GET"
        self.url = b""
        self.headers: dict[str, str] = {}
        self.version = "1.1"
        self.keep_alive = True
        self.upgrade = False
        self.body = bytearray()
        self.complete = False
        self.head_done = False

    def target(self) -> tuple[str, str]:
        """PATH_INFO (percent-decoded as latin-1, as pywsgi does) and QUERY_STRING."""
        url = self.url
        if not url.startswith(b"/"):  # absolute form (http://host/path) or '*'
            try:
                parsed = httptools.parse_url(url)
            except httptools.HttpParserInvalidURLError:
                return url.decode("latin-1"), ""
            path, query = parsed.path or b"/", parsed.query or b""
        else:
            path, _, query = url.partition(b"?")
        text = path.decode("latin-1")
        if "%" in text:
            text = unquote(text, "latin-1")
        return text, query.decode("latin-1")


class RequestParser:
    """Feeds bytes to httptools and queues the requests it finds; the parser's callback object."""

    __slots__ = ("_parser", "requests", "_current", "head_bytes", "fed_bytes", "oversized")

    def __init__(self) -> None:
        self._parser = httptools.HttpRequestParser(self)
        self.requests: deque[Request] = deque()
        self._current: Request | None = None
        # The head's own bytes (request line and headers as the parser hands them over): exact.
        self.head_bytes = 0
        # Bytes fed while a head was unfinished: bounds a head the parser still buffers (one huge
        # header arriving slowly). A read that completes a head may carry body bytes too, so
        # this counter only refuses beyond the cap plus one read (`loose_cap`).
        self.fed_bytes = 0
        self.oversized = False  # a head over MAX_HEAD_BYTES was seen: the connection must end

    def feed(self, data: bytes) -> None:
        """Parse `data`. Raises httptools.HttpParserError on a malformed request. An upgrade
        (or CONNECT) ends parsing: the request is served as a plain one, and the connection
        closes after it, since what follows is no longer HTTP."""
        current = self._current
        if current is None or not current.head_done:
            self.fed_bytes += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            last = self.requests[-1] if self.requests else None
            if last is not None:
                last.upgrade, last.keep_alive, last.complete = True, False, True

    def head_too_large(self, loose_cap: int) -> bool:
        """A head over MAX_HEAD_BYTES: finished (counted exactly), or unfinished after more than
        `loose_cap` bytes (the cap plus one read: that read may hold body bytes as well)."""
        current = self._current
        unfinished = current is None or not current.head_done
        return self.oversized or (unfinished and (self.head_bytes > MAX_HEAD_BYTES or self.fed_bytes > loose_cap))

    # httptools callbacks -------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.head_bytes = 0
        self._current = Request()
        self.requests.append(self._current)

    def on_url(self, url: bytes) -> None:
        self.head_bytes += len(url)
        current = self._current
        if current is not None:
            current.url += url  # may come in pieces

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value) + 4  # ": " and CRLF
        current = self._current
        if current is None:
            return
        key = environ_key(name.lower())
        if key is None:
            return
        # RFC 9110 5.5: whitespace around a field value is not part of it (llhttp keeps the trailing).
        text = value.strip(b" \t").decode("latin-1")
        headers = current.headers
        headers[key] = headers[key] + "," + text if key in headers else text

    def on_headers_complete(self) -> None:
        current = self._current
        if current is None:
            return
        parser = self._parser
        current.method = parser.get_method().decode("latin-1")
        current.version = parser.get_http_version()
        current.keep_alive = parser.should_keep_alive()
        current.head_done = True
        self.oversized = self.oversized or self.head_bytes > MAX_HEAD_BYTES
        self.head_bytes = self.fed_bytes = 0

    def on_body(self, body: bytes) -> None:
        current = self._current
        if current is not None:
            current.body += body

    def on_message_complete(self) -> None:
        current = self._current
        if current is not None:
            current.complete = True
