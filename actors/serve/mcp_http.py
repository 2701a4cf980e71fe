"""MCP over HTTP for downstream clients: Streamable HTTP (/mcp) and legacy HTTP+SSE (/sse)."""
from __future__ import annotations

from typing import Any, Iterator
from urllib.parse import parse_qs


from actors.ops import trace_context
from actors.protocol import inbound, jsonrpc, mcp
from actors.serve import sse_framing as sse
from actors.serve.client_counts import ClientCounts
from actors.serve.listener import watch_hangup
from actors.serve.post_wait import ENDED, REPLY_TIMEOUT, PostSink, PostWait, until_answer
from actors.serve.modern_http import ModernFront, routes_modern
from actors.serve.relay import Relay, is_relay
from actors.serve.security import CLIENT_KEY
from actors.serve.session_proxy import SessionProxy, tag_of
from actors.serve.quotas import CLIENT_FULL
from actors.serve.sessions import CLOSE, RETRY_AFTER_S, HttpSession, Refused, SessionTable
from actors.serve.stream_buffer import EMPTY, StreamBuffer, StreamStats, shut_down_later

JSON_MEDIA_TYPE = "application/json"  # the only body POST /mcp and /messages take
MAX_BODY = 16 * 1024 * 1024

Response = tuple[str, list, Any]  # status, headers, body bytes or an iterator of bytes


def _json(status: str, body: dict | list, extra: list | None = None) -> Response:
    return status, [("Content-Type", "application/json"), *(extra or [])], jsonrpc.encode(body)


def _plain(status: str, text: str) -> Response:
    return status, [("Content-Type", "text/plain; charset=utf-8")], text.encode()


class McpHttp:
    """The two MCP endpoints; one instance per HTTP app. Its sessions live in a SessionTable;
    modern (2026-07-28, stateless) requests on /mcp take the ModernFront instead."""

    def __init__(self, runtime):
        self.rt = runtime
        serve = runtime.config.serve
        self.streams = StreamStats()  # notifications dropped, streams closed for slowness: /status, /metrics
        self.sessions = SessionTable(runtime, serve.session_idle, serve.max_sessions, streams=self.streams)
        self.modern = ModernFront(runtime, self.streams)
        self.relay = Relay(runtime)
        self.proxy = SessionProxy(runtime)  # legacy sessions owned by another instance of the cluster
        self.clients = ClientCounts(serve.clients)  # requests by client name, for /status and /metrics

    def close(self) -> list:
        """Close every session and end every modern request; returns their Session actor refs."""
        return self.modern.close() + self.sessions.close_all("troupe shutting down")

    @staticmethod
    def _full(refused: Refused, rid=None, legacy: bool = False) -> Response:
        """No room for a new session: 429 when the client's own quota is full, 503 when troupe's is."""
        status = "429 Too Many Requests" if refused.scope == CLIENT_FULL else "503 Service Unavailable"
        retry = [("Retry-After", str(RETRY_AFTER_S))]
        if legacy:
            status, headers, body = _plain(status, refused.text)
            return status, [*headers, *retry], body
        return _json(status, jsonrpc.error(rid, jsonrpc.SERVER_UNAVAILABLE, refused.text), retry)

    # ---------------------------------------------------------------- Streamable HTTP

    def post(self, environ) -> Response:
        problem = _not_json(environ)
        if problem:
            return problem
        body, problem = _read_body(environ)
        if problem:
            return problem
        if is_relay(environ):  # another instance of the cluster, calling a server this one runs
            return self.relay.post(environ, body)
        sid = environ.get("HTTP_MCP_SESSION_ID") or ""
        elsewhere = self.proxy.route(environ, sid, body, lambda: _gone(None)) if sid else None
        if elsewhere is not None:
            return elsewhere
        # bad JSON, too deep, of the wrong shape or too big a batch
        checked = inbound.parse(body, _peer(environ), self.rt.config.serve.max_batch)
        msg = checked.message
        if msg is None:
            return _refused(checked)
        self.clients.note(environ.get(CLIENT_KEY), msg)
        if self.rt.tracing is not None:  # the POST's traceparent header: its request's context, as _meta is
            trace_context.header_into_meta(environ, msg)
        if routes_modern(environ, msg):  # stateless: no session issued, required or looked at
            return self.modern.post(environ, msg)
        if checked.batch:
            return self._post_batch(environ, msg, checked.answers)
        if not isinstance(msg, dict):
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "expected a JSON-RPC object"))
        version = environ.get("HTTP_MCP_PROTOCOL_VERSION")
        if version is not None and version not in mcp.SUPPORTED_VERSIONS:
            return _json("400 Bad Request", jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                                          f"unsupported MCP-Protocol-Version {version!r}"))
        created = msg.get("method") == "initialize" and "id" in msg and not sid
        if not created and not sid:
            return _json("400 Bad Request", jsonrpc.error(msg.get("id"), jsonrpc.INVALID_REQUEST,
                                                          "Mcp-Session-Id header required (initialize first)"))
        if "method" not in msg or "id" not in msg:  # notification or response: nothing to wait for
            hs = self.sessions.touch(sid, client=environ.get(CLIENT_KEY))
            if hs is None or not self._send(hs, msg, hs.notify):
                return _gone(msg.get("id"))
            return "202 Accepted", [], b""
        if created and (refusal := self.proxy.refusal()) is not None:
            return _json("503 Service Unavailable", jsonrpc.error(msg["id"], jsonrpc.SERVER_UNAVAILABLE, refusal),
                         [("Retry-After", str(RETRY_AFTER_S))])
        client = environ.get(CLIENT_KEY)
        taken = self.sessions.open(legacy=False, rid=msg["id"], tag=self.proxy.tag(), client=client) if created \
            else self.sessions.acquire(sid, msg["id"], client=client)
        if isinstance(taken, Refused):
            return self._full(taken, msg["id"])
        if taken is None:
            return _gone(msg["id"])
        hs, replies = taken
        assert replies is not None  # open(legacy=False) and acquire both give a reply queue
        headers = [("Mcp-Session-Id", hs.id)]
        sse_reply = "text/event-stream" in environ.get("HTTP_ACCEPT", "") and not self.rt.config.serve.json_response
        wait = PostWait(environ, hs, replies, msg["id"], stream=sse_reply)
        self._send(hs, msg, wait.sink)  # a dead session answers through `replies` too
        if sse_reply:
            # An SSE reply, as the reference servers give: progress, logs and server→client
            # requests of this call travel on it ahead of the answer. Nothing is sent before the
            # first message anyway; when that is the answer, the whole stream is that one event,
            # sent with a length in one write (no chunked framing and no end chunk: issue 20).
            try:
                first = wait.next()
            except BaseException:  # the handler is being killed: nothing of this POST may stay held
                wait.done(lambda: self.sessions.release(hs, replies))
                raise
            if first is ENDED:  # cancelled (no answer is owed), or its client hung up
                wait.done(lambda: self.sessions.release(hs, replies))
                return "202 Accepted", [*headers], b""
            if _answers(first, msg["id"]):
                wait.done(lambda: self.sessions.release(hs, replies))
                event = sse.event(first, name="message")
                return "200 OK", [*sse.HEADERS, *headers, ("Content-Length", str(len(event)))], [event]
            return "200 OK", [*sse.HEADERS, *headers], \
                until_answer(first, wait, lambda: self.sessions.release(hs, replies))
        # JSON: notifications that precede the answer cannot travel in it and are dropped.
        try:
            answer = wait.next()
            while answer is not ENDED and not _answers(answer, msg["id"]):
                answer = wait.next()
        finally:
            wait.done(lambda: self.sessions.release(hs, replies))
        if answer is ENDED:
            return "202 Accepted", [*headers], b""  # cancelled: no JSON-RPC answer is owed
        if created and "error" in answer:  # a failed initialize leaves no session behind
            self.sessions.close(hs.id, "initialize failed")
        return _json("200 OK", answer, headers)

    def _send(self, hs: HttpSession, message, sink) -> bool:
        """Hand a message to the session's actor; a dead actor ends the session (and answers its POSTs)."""
        if hs.send(message, sink):
            return True
        self.sessions.gone(hs, "its session actor stopped")
        return False

    def _post_batch(self, environ, batch: list, refused: list) -> Response:
        """A 2025-03-26 batch: the session answers with one array (or refuses it for other versions);
        the entries the boundary `refused` have their answers in that array too."""
        sid = environ.get("HTTP_MCP_SESSION_ID") or ""
        if not sid:
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST,
                                                          "a batch needs a live Mcp-Session-Id"))
        client = environ.get(CLIENT_KEY)
        if not any(isinstance(m, dict) and "method" in m and "id" in m for m in batch):
            hs = self.sessions.touch(sid, client=client)
            if hs is None or not self._send(hs, batch, hs.notify):
                return _gone(None)
            return _json("200 OK", refused) if refused else ("202 Accepted", [], b"")
        taken = self.sessions.acquire(sid, None, client=client)
        if taken is None:
            return _gone(None)
        hs, replies = taken
        self._send(hs, batch, PostSink(replies))  # every entry cancelled: the POST ends with no answer
        try:
            while True:  # notifications ahead of the answers cannot travel in a JSON reply
                answer = replies.get(timeout=REPLY_TIMEOUT)
                if answer is EMPTY:
                    return _json("200 OK", jsonrpc.error(None, jsonrpc.INTERNAL_ERROR, "troupe: no answer in time"))
                if answer is ENDED:
                    return "202 Accepted", [("Mcp-Session-Id", hs.id)], b""
                if isinstance(answer, list) or "method" not in answer:
                    return "200 OK", [("Content-Type", "application/json"), ("Mcp-Session-Id", hs.id)], \
                        jsonrpc.encode(refused + answer if isinstance(answer, list) else answer)
        finally:
            replies.close()
            self.sessions.release(hs, replies)

    def get(self, environ) -> Response:
        if _modern_client(environ):
            return _no_stream()
        if "text/event-stream" not in environ.get("HTTP_ACCEPT", ""):
            return _plain("406 Not Acceptable", "GET /mcp needs Accept: text/event-stream")
        sid = environ.get("HTTP_MCP_SESSION_ID")
        elsewhere = self.proxy.route(environ, sid, b"", _stream_gone) if sid else None
        if elsewhere is not None:
            return elsewhere
        taken = self.sessions.open_stream(sid, environ.get(CLIENT_KEY)) if sid else None
        if taken is None:
            return _plain("404 Not Found" if sid else "400 Bad Request", "unknown or missing Mcp-Session-Id")
        hs, stream = taken
        return "200 OK", [*sse.HEADERS, ("Mcp-Session-Id", hs.id)], \
            _stream(environ, stream, first=sse.comment("stream open"),
                    on_close=lambda: self.sessions.stream_ended(hs, stream))

    def delete(self, environ) -> Response:
        if _modern_client(environ):
            return _no_stream()
        sid = environ.get("HTTP_MCP_SESSION_ID") or ""
        elsewhere = self.proxy.route(environ, sid, b"", _stream_gone) if sid else None
        if elsewhere is not None:
            return elsewhere
        if not self.sessions.close(sid, "session deleted by client", legacy=False, client=environ.get(CLIENT_KEY)):
            return _plain("404 Not Found", "unknown session")
        return "200 OK", [], b""

    # ---------------------------------------------------------------- legacy HTTP+SSE

    def legacy_stream(self, environ) -> Response:
        refusal = self.proxy.refusal()
        if refusal is not None:
            status, headers, body = _plain("503 Service Unavailable", refusal)
            return status, [*headers, ("Retry-After", str(RETRY_AFTER_S))], body
        taken = self.sessions.open(legacy=True, tag=self.proxy.tag(), client=environ.get(CLIENT_KEY))
        if isinstance(taken, Refused):
            return self._full(taken, legacy=True)
        hs, _ = taken
        stream = hs.stream
        assert stream is not None  # open(legacy=True) has just given it its stream
        prefix = environ.get("SCRIPT_NAME", "")
        endpoint = sse.event(f"{prefix}/messages?session_id={hs.id}", name="endpoint")
        return "200 OK", list(sse.HEADERS), \
            _stream(environ, stream, first=endpoint, on_close=lambda: self.sessions.stream_ended(hs, stream))

    def legacy_post(self, environ) -> Response:
        problem = _not_json(environ)
        if problem:
            return problem
        query = parse_qs(environ.get("QUERY_STRING", ""))
        sid = (query.get("session_id") or query.get("sessionId") or [""])[0]
        if tag_of(sid) not in (None, self.proxy.tag()) and self.proxy.tag() is not None:
            # another instance's session: its body goes there whole (read here, bounded as ever)
            body, problem = _read_body(environ)
            if problem:
                return problem
            elsewhere = self.proxy.route(environ, sid, body, lambda: _plain("404 Not Found", "unknown session_id"))
            if elsewhere is not None:
                return elsewhere
            return _plain("404 Not Found", "unknown session_id")
        hs = self.sessions.touch(sid, legacy=True, client=environ.get(CLIENT_KEY))
        if hs is None:
            return _plain("404 Not Found", "unknown session_id")
        body, problem = _read_body(environ)
        if problem:
            return problem
        # its refusals (too big a batch too) travel on the SSE stream as well
        checked = inbound.parse(body, _peer(environ), self.rt.config.serve.max_batch)
        to = inbound.deliver(checked, hs.notify)
        if to is None:
            return _refused(checked)
        self.clients.note(environ.get(CLIENT_KEY), checked.message)
        if self.rt.tracing is not None:
            trace_context.header_into_meta(environ, checked.message)
        if not self._send(hs, checked.message, to):  # every answer travels on the SSE stream
            return _plain("404 Not Found", "session closed")
        return "202 Accepted", [("Content-Type", "text/plain")], b"Accepted"


def _peer(environ) -> str:
    """Who sent a request, for the boundary's log lines: the client serve.clients names, if any."""
    client = environ.get(CLIENT_KEY)
    return f"http client {client.name}" if client is not None else "http client"


def _refused(checked: inbound.Checked) -> Response:
    """A payload the boundary answered whole: 400 with its JSON-RPC error (an array for a batch),
    or 202 for a malformed notification, which is dropped unanswered."""
    if not checked.answers:
        return "202 Accepted", [], b""
    body = checked.answers if checked.batch else checked.answers[0]
    return "400 Bad Request", [("Content-Type", "application/json")], jsonrpc.encode(body)


def _modern_client(environ) -> bool:
    return environ.get("HTTP_MCP_PROTOCOL_VERSION") in mcp.MODERN_VERSIONS


def _no_stream() -> Response:
    """Modern MCP has no GET stream and no session to DELETE: POST is all there is."""
    status, headers, body = _plain("405 Method Not Allowed", "MCP 2026-07-28 over HTTP takes POST only")
    return status, [*headers, ("Allow", "POST")], body


def _stream_gone() -> Response:
    return _plain("404 Not Found", "unknown or expired session; initialize again")


def _gone(rid) -> Response:
    """404 for an unknown, expired or closed session: the client initializes again (as the spec says)."""
    return _json("404 Not Found", jsonrpc.error(rid, jsonrpc.INVALID_REQUEST,
                                                "unknown or expired session; initialize again"))


def _answers(message, rid) -> bool:
    return type(message) is dict and "method" not in message and message.get("id") == rid


def _stream(environ, stream: StreamBuffer, first: bytes, on_close) -> Iterator[bytes]:
    """A session's server→client stream until it is closed (CLOSE), its client hangs up, or it
    falls behind serve.stream_buffer_bytes with what cannot be dropped (then its socket is shut
    down after a grace, which ends a write blocked on a client that reads nothing)."""
    closer: list = []

    def overflowed() -> None:  # a Session's greenlet: never block it
        stream.put(CLOSE)
        closer.append(shut_down_later(environ))
    stream.on_overflow = overflowed
    if stream.slow:  # it fell behind before its response began
        overflowed()
    watcher = watch_hangup(environ, lambda: stream.put(CLOSE))
    try:
        yield first
        while True:
            item = stream.get(timeout=sse.KEEPALIVE_S)
            if item is EMPTY:
                yield sse.comment()
                continue
            if item is CLOSE:
                return
            yield item
    finally:
        if watcher is not None:
            watcher.kill(block=False)
        for greenlet in closer:
            if greenlet is not None:
                greenlet.kill(block=False)
        stream.close()  # what is left goes now, whoever still holds the buffer
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
    try:
        body = environ["wsgi.input"].read(length) if length else environ["wsgi.input"].read(MAX_BODY + 1)
    except TimeoutError:  # troupe's server bounds each pause in a body (serve.header_timeout)
        status, headers, text = _plain("408 Request Timeout", "the request body stopped arriving")
        return b"", (status, [*headers, ("Connection", "close")], text)
    if len(body) > MAX_BODY:
        return b"", _plain("413 Payload Too Large", f"body over {MAX_BODY} bytes")
    return body, None
