"""MCP over HTTP for downstream clients: Streamable HTTP (/mcp) and legacy HTTP+SSE (/sse)."""
from __future__ import annotations

import secrets
import time
from typing import Any, Iterator

import gevent
import gevent.queue

from ..messages import ClientGone, ClientMessage
from ..protocol import jsonrpc, mcp
from ..session import Session
from . import sse

JSON_MEDIA_TYPE = "application/json"  # the only body POST /mcp and /messages take
MAX_BODY = 16 * 1024 * 1024
REPLY_TIMEOUT = 900.0  # a safety net only: every forwarded call already has its server's timeout
IDLE_SESSION_S = 3600.0  # a Streamable HTTP session unused this long is closed
_CLOSE = object()  # queue sentinel: end this stream

Response = tuple[str, list, Any]  # status, headers, body bytes or an iterator of bytes


def _json(status: str, body: dict, extra: list | None = None) -> Response:
    return status, [("Content-Type", "application/json"), *(extra or [])], jsonrpc.encode(body)


def _plain(status: str, text: str) -> Response:
    return status, [("Content-Type", "text/plain; charset=utf-8")], text.encode()


class HttpSession:
    """One downstream client over HTTP: its Session actor and its open server→client stream."""

    def __init__(self, runtime, legacy: bool):
        self.id = secrets.token_urlsafe(24)
        self.legacy = legacy
        self.stream: gevent.queue.Queue | None = gevent.queue.Queue() if legacy else None
        self.last_seen = time.monotonic()
        self.ref = Session.start(runtime, notify=self.notify, key=f"http-{self.id[:8]}")
        self.waiting: dict[gevent.queue.Queue, object] = {}  # open POSTs: their reply queue → request id

    def expect(self, rid) -> gevent.queue.Queue:
        """A queue for the answer to one POSTed request, released by `settled`."""
        replies: gevent.queue.Queue = gevent.queue.Queue()
        self.waiting[replies] = rid
        return replies

    def settled(self, replies: gevent.queue.Queue) -> None:
        self.waiting.pop(replies, None)

    def notify(self, message: dict) -> None:
        """Unsolicited messages (list_changed…) go on the open stream, if any; never broadcast."""
        stream = self.stream
        if stream is not None:
            stream.put(message)

    def close(self, reason: str) -> None:
        try:
            self.ref.tell(ClientGone(reason))
        except Exception:
            pass
        if self.stream is not None:
            self.stream.put(_CLOSE)
        # The session's upstream calls are cancelled, so no answer will come for them:
        # every open POST gets one now instead of waiting out REPLY_TIMEOUT.
        waiting, self.waiting = self.waiting, {}
        for replies, rid in waiting.items():
            replies.put(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"session closed: {reason}"))


class McpHttp:
    """The two MCP endpoints; one instance per HTTP server."""

    def __init__(self, runtime):
        self.rt = runtime
        self.sessions: dict[str, HttpSession] = {}
        self._reaper = gevent.spawn(self._reap_idle)

    def close(self) -> None:
        self._reaper.kill(block=False)
        for hs in list(self.sessions.values()):
            hs.close("troupe shutting down")
        self.sessions.clear()

    def _reap_idle(self) -> None:
        while True:
            gevent.sleep(60)
            now = time.monotonic()
            for sid, hs in list(self.sessions.items()):
                if not hs.legacy and now - hs.last_seen > IDLE_SESSION_S:
                    self.sessions.pop(sid, None)
                    hs.close("idle session expired")

    # ---------------------------------------------------------------- Streamable HTTP

    def post(self, environ) -> Response:
        problem = _not_json(environ)
        if problem:
            return problem
        body, problem = _read_body(environ)
        if problem:
            return problem
        try:
            msg = jsonrpc.decode(body)
        except ValueError as exc:
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"parse error: {exc}"))
        if isinstance(msg, list) and msg:
            return self._post_batch(environ, msg)
        if not isinstance(msg, dict):
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "expected a JSON-RPC object"))
        version = environ.get("HTTP_MCP_PROTOCOL_VERSION")
        if version is not None and version not in mcp.SUPPORTED_VERSIONS:
            return _json("400 Bad Request", jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                                          f"unsupported MCP-Protocol-Version {version!r}"))
        sid = environ.get("HTTP_MCP_SESSION_ID")
        created = None
        if msg.get("method") == "initialize" and "id" in msg and not sid:
            created = HttpSession(self.rt, legacy=False)
            self.sessions[created.id] = created
            hs = created
        elif not sid:
            return _json("400 Bad Request", jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                                          "Mcp-Session-Id header required (initialize first)"))
        else:
            hs = self.sessions.get(sid)
            if hs is None or hs.legacy:
                return _json("404 Not Found", jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                                            "unknown or expired session; initialize again"))
        hs.last_seen = time.monotonic()
        if "method" not in msg or "id" not in msg:  # notification or response: nothing to wait for
            hs.ref.tell(ClientMessage(msg, hs.notify))
            return "202 Accepted", [], b""
        headers = [("Mcp-Session-Id", hs.id)]
        replies = hs.expect(msg["id"])
        hs.ref.tell(ClientMessage(msg, replies.put))
        if "text/event-stream" in environ.get("HTTP_ACCEPT", "") and not self.rt.config.serve.json_response:
            # An SSE reply, as the reference servers give: progress, logs and server→client
            # requests of this call travel on it ahead of the answer.
            return "200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), *headers], \
                _until_answer(None, replies, msg["id"], lambda: hs.settled(replies))
        # JSON: notifications that precede the answer cannot travel in it and are dropped.
        try:
            answer = replies.get(timeout=REPLY_TIMEOUT)
            while not _answers(answer, msg["id"]):
                answer = replies.get(timeout=REPLY_TIMEOUT)
        except gevent.queue.Empty:
            answer = jsonrpc.error(msg["id"], jsonrpc.INTERNAL_ERROR, "troupe: no answer in time")
        finally:
            hs.settled(replies)
        if created and "error" in answer:  # a failed initialize leaves no session behind
            self.sessions.pop(created.id, None)
            created.close("initialize failed")
        return _json("200 OK", answer, headers)

    def _post_batch(self, environ, batch: list) -> Response:
        """A 2025-03-26 batch: the session answers with one array (or refuses it for other versions)."""
        hs = self.sessions.get(environ.get("HTTP_MCP_SESSION_ID") or "")
        if hs is None or hs.legacy:
            return _json("404 Not Found" if environ.get("HTTP_MCP_SESSION_ID") else "400 Bad Request",
                         jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "a batch needs a live Mcp-Session-Id"))
        hs.last_seen = time.monotonic()
        if not any(isinstance(m, dict) and "method" in m and "id" in m for m in batch):
            hs.ref.tell(ClientMessage(batch, hs.notify))
            return "202 Accepted", [], b""
        replies = hs.expect(None)
        hs.ref.tell(ClientMessage(batch, replies.put))
        try:
            while True:  # notifications ahead of the answers cannot travel in a JSON reply
                try:
                    answer = replies.get(timeout=REPLY_TIMEOUT)
                except gevent.queue.Empty:
                    return _json("200 OK", jsonrpc.error(None, jsonrpc.INTERNAL_ERROR, "troupe: no answer in time"))
                if isinstance(answer, list) or "method" not in answer:
                    return "200 OK", [("Content-Type", "application/json"), ("Mcp-Session-Id", hs.id)], \
                        jsonrpc.encode(answer)
        finally:
            hs.settled(replies)

    def get(self, environ) -> Response:
        if "text/event-stream" not in environ.get("HTTP_ACCEPT", ""):
            return _plain("406 Not Acceptable", "GET /mcp needs Accept: text/event-stream")
        hs = self.sessions.get(environ.get("HTTP_MCP_SESSION_ID") or "")
        if hs is None or hs.legacy:
            return _plain("404 Not Found" if environ.get("HTTP_MCP_SESSION_ID") else "400 Bad Request",
                          "unknown or missing Mcp-Session-Id")
        if hs.stream is not None:
            hs.stream.put(_CLOSE)  # one stream per session: the newest wins
        stream = hs.stream = gevent.queue.Queue()
        hs.last_seen = time.monotonic()
        return "200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"),
                          ("Mcp-Session-Id", hs.id)], _stream(stream, hs, first=sse.comment("stream open"))

    def delete(self, environ) -> Response:
        sid = environ.get("HTTP_MCP_SESSION_ID")
        hs = self.sessions.pop(sid or "", None)
        if hs is None:
            return _plain("404 Not Found", "unknown session")
        hs.close("session deleted by client")
        return "200 OK", [], b""

    # ---------------------------------------------------------------- legacy HTTP+SSE

    def legacy_stream(self, environ) -> Response:
        hs = HttpSession(self.rt, legacy=True)
        self.sessions[hs.id] = hs
        prefix = environ.get("SCRIPT_NAME", "")
        endpoint = sse.event(f"{prefix}/messages?session_id={hs.id}", name="endpoint")

        def gone() -> None:
            self.sessions.pop(hs.id, None)
            hs.close("SSE stream closed")
        return "200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")], \
            _stream(hs.stream, hs, first=endpoint, on_close=gone, name="message")

    def legacy_post(self, environ) -> Response:
        from urllib.parse import parse_qs
        problem = _not_json(environ)
        if problem:
            return problem
        query = parse_qs(environ.get("QUERY_STRING", ""))
        sid = (query.get("session_id") or query.get("sessionId") or [""])[0]
        hs = self.sessions.get(sid)
        if hs is None or not hs.legacy:
            return _plain("404 Not Found", "unknown session_id")
        body, problem = _read_body(environ)
        if problem:
            return problem
        try:
            msg = jsonrpc.decode(body)
        except ValueError as exc:
            hs.notify(jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"parse error: {exc}"))
            return _plain("400 Bad Request", "invalid JSON")
        hs.ref.tell(ClientMessage(msg, hs.notify))  # every answer travels on the SSE stream
        return "202 Accepted", [("Content-Type", "text/plain")], b"Accepted"


def _answers(message: dict, rid) -> bool:
    return "method" not in message and message.get("id") == rid


def _until_answer(first: dict | None, replies: gevent.queue.Queue, rid, done) -> Iterator[bytes]:
    message = first
    try:
        while True:
            if message is not None:
                yield sse.event(message, name="message")
                if _answers(message, rid):
                    return
            try:
                message = replies.get(timeout=REPLY_TIMEOUT)
            except gevent.queue.Empty:
                yield sse.event(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, "troupe: no answer in time"),
                                name="message")
                return
    finally:
        done()


def _stream(queue: gevent.queue.Queue, hs: HttpSession, first: bytes, on_close=None,
            name: str = "message") -> Iterator[bytes]:
    try:
        yield first
        while True:
            try:
                item = queue.get(timeout=sse.KEEPALIVE_S)
            except gevent.queue.Empty:
                yield sse.comment()
                continue
            if item is _CLOSE:
                return
            hs.last_seen = time.monotonic()
            yield sse.event(item, name=name)
    finally:
        if hs.stream is queue and not hs.legacy:
            hs.stream = None
        if on_close is not None:
            on_close()


def _not_json(environ) -> Response | None:
    """415 unless the body is declared JSON: text/plain and form posts are what a hostile page
    can send cross-site without a CORS preflight, so they never reach a session."""
    kind = (environ.get("CONTENT_TYPE") or "").split(";", 1)[0].strip().lower()
    if kind == JSON_MEDIA_TYPE:
        return None
    return _json("415 Unsupported Media Type", jsonrpc.error(
        None, jsonrpc.INVALID_REQUEST, f"Content-Type must be {JSON_MEDIA_TYPE}, got {kind[:80] or 'none'}"),
        [("Accept-Post", JSON_MEDIA_TYPE)])


def _read_body(environ) -> tuple[bytes, Response | None]:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return b"", _plain("400 Bad Request", "bad Content-Length")
    if length > MAX_BODY:
        return b"", _plain("413 Payload Too Large", f"body over {MAX_BODY} bytes")
    body = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        return b"", _plain("413 Payload Too Large", f"body over {MAX_BODY} bytes")
    return body, None
