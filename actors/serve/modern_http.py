"""MCP 2026-07-28 (modern) over Streamable HTTP: stateless POSTs, each answered on its own response.

No Mcp-Session-Id is issued or read and no session table entry is made. Every modern request is
handed to one long-lived Session actor that keeps no per-client state between requests; the
front renames each request's id (two clients may both send id 1 at once) and renames it back in
what the Session sends on that request's sink. Closing the response is the cancellation.
"""
from __future__ import annotations

import hashlib
import itertools
import threading
import time
from typing import Any, Iterator

import gevent
import pykka
from loguru import logger

from actors.catalogue import views
from actors.downstream.session import Session
from actors.messages import ClientGone, ClientMessage
from actors.protocol import jsonrpc, mcp, modern
from actors.protocol.mcp import MODERN_VERSIONS
from actors.protocol.modern import HEADER_MISMATCH
from actors.ratelimit.refusal import TOO_MANY, is_refusal, retry_after_header
from actors.serve import modern_headers, sse_framing as sse
from actors.serve.stream_buffer import SOCKET_KEY
from actors.serve.security import CLIENT_KEY
from actors.serve.modern_call import HUNG_UP, SUBSCRIPTION_META, ModernCall, outward, overflowed
from actors.serve.stream_buffer import EMPTY, StreamStats
from actors.serve.modern_headers import HeaderMismatch, header
from actors.tells import tell

LISTEN = "subscriptions/listen"
REPLY_TIMEOUT = 900.0  # a safety net only, as on the session path; a listen has none (it lasts)
# An SSE answer is committed only when the Session sends something ahead of the answer, or after
# this long: an answer that comes first goes out as JSON, so its HTTP status can say 404 or 400.
DEFER_SSE_S = sse.KEEPALIVE_S
# The spec's HTTP status for an error answer of a modern request (as the official SDKs map them).
STATUS = {jsonrpc.PARSE_ERROR: "400 Bad Request", jsonrpc.INVALID_REQUEST: "400 Bad Request",
          jsonrpc.INVALID_PARAMS: "400 Bad Request", HEADER_MISMATCH: "400 Bad Request",
          modern.MISSING_CAPABILITY: "400 Bad Request", modern.UNSUPPORTED_VERSION: "400 Bad Request",
          jsonrpc.METHOD_NOT_FOUND: "404 Not Found"}
# A hang-up is watched for (a greenlet each) only once a request has waited this long: most
# answers come sooner, and a client that left within it costs at most this much of the call.
QUICK_S = 0.05
SESSION_CHECK_S = 5.0  # how often a waiting request checks that its Session still lives
_ABSENT = object()
_CLOSING = object()  # reply queue sentinel: troupe is stopping

Response = tuple[str, list, Any]


def routes_modern(environ, msg) -> bool:
    """True when a POST /mcp takes the stateless path: its MCP-Protocol-Version is a modern one
    (a handshake, `initialize`, never is, unless it carries the modern envelope: then it is a
    modern request for a removed method, answered 404 and -32601); or a version troupe does not
    know on a request whose `_meta` names one (so that a newer client hears -32022 and the versions
    to retry with); or a `server/discover` with no version header and no session (an era probe)."""
    version = header(environ, "MCP-Protocol-Version")
    if isinstance(msg, dict) and msg.get("method") == "initialize":
        return version in MODERN_VERSIONS and modern.is_modern(msg.get("params"))
    if version is not None:
        if version in MODERN_VERSIONS:
            return True
        return version not in mcp.SUPPORTED_VERSIONS and isinstance(msg, dict) and modern.is_modern(msg.get("params"))
    return isinstance(msg, dict) and msg.get("method") == "server/discover" and not environ.get("HTTP_MCP_SESSION_ID")


def principal(environ) -> str:
    """Who sends a stateless request, as far as troupe can tell: its credential, digested (a
    parked call's retry must come from the same one). Without a token every caller is one."""
    auth = environ.get("HTTP_AUTHORIZATION")
    return "http:" + hashlib.sha256(auth.encode("utf-8", "replace")).hexdigest()[:24] if auth else "http"


def _json(status: str, body: dict) -> Response:
    return status, [("Content-Type", "application/json")], jsonrpc.encode(body)


def _ignore(message) -> None:
    pass


class _HangupWatch:
    """Puts HUNG_UP on a call's queue once its client's socket turns readable: the client sends
    nothing more while its request is answered, so readable means it hung up (or pipelined a request
    that cannot be served before this answer either). A bare event-loop watcher, not the greenlet of
    listener.watch_hangup: spawning and killing that costs about 50 µs, paid by every modern call
    slower than QUICK_S, which under load is most of them."""

    __slots__ = ("_io",)

    def __init__(self, io) -> None:
        self._io = io

    @classmethod
    def start(cls, environ, call: ModernCall) -> _HangupWatch | None:
        """None when a host's own server serves us (no socket in the environ): then a hang-up shows
        only when a keep-alive write fails."""
        sock = environ.get(SOCKET_KEY)
        if sock is None:
            return None
        try:
            io = gevent.get_hub().loop.io(sock.fileno(), 1)  # 1: readable
        except (OSError, ValueError):  # the socket is closed already: its client is gone
            call.replies.put(HUNG_UP)
            return None

        def readable() -> None:  # in the hub: must not block, and fires once
            io.stop()
            call.replies.put(HUNG_UP)  # an unbounded queue: never blocks
        io.start(readable)
        return cls(io)

    def stop(self) -> None:
        self._io.stop()
        self._io.close()


class ModernFront:
    """The stateless path of POST /mcp. Owns the modern Sessions, one per client of serve.clients
    (each served in its client's profile; one for all when there are none), started on first use
    and replaced if one dies, and the table of modern requests in flight; handler greenlets change
    them only through these methods, under one lock. Tells the Session ClientMessage (each request, and a
    `notifications/cancelled` when its client closes the response) and ClientGone at shutdown."""

    def __init__(self, runtime, streams: StreamStats | None = None):
        self.rt = runtime
        self.streams = streams  # the front's drop counters (/status, /metrics)
        self._lock = threading.Lock()  # a gevent lock once patched
        self._sessions: dict[Any, Any] = {}  # client name (None: no client named) → its Session
        self._generations = itertools.count(1)
        self._ids = itertools.count(1)
        self._calls: dict[str, ModernCall] = {}
        self._closed = False

    # ---------------------------------------------------------------- a request

    def post(self, environ, msg) -> Response:
        if not isinstance(msg, dict):
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST,
                                                          "modern MCP takes one JSON-RPC object per POST, no batch"))
        method, rid = msg.get("method"), msg.get("id")
        if method is None:
            return _json("400 Bad Request", jsonrpc.error(rid if isinstance(rid, (str, int)) else None,
                                                          jsonrpc.INVALID_REQUEST,
                                                          "a modern client posts requests only (no responses)"))
        if "id" not in msg:
            # No client notification means anything here: a cancel is closing the response, and a
            # posted one by request id would let one caller cancel another's call.
            return "202 Accepted", [], b""
        if rid is None or isinstance(rid, (bool, float, dict, list)) or not isinstance(method, str) \
                or msg.get("jsonrpc") != "2.0":
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST,
                                                          "not a JSON-RPC 2.0 request (id: string or integer)"))
        accept = environ.get("HTTP_ACCEPT", "")
        wants_sse = "text/event-stream" in accept and (method == LISTEN or not self.rt.config.serve.json_response)
        if method == LISTEN and not wants_sse:
            return "406 Not Acceptable", [("Content-Type", "text/plain; charset=utf-8")], \
                b"subscriptions/listen answers with a stream: send Accept: text/event-stream"
        if header(environ, "MCP-Protocol-Version") is not None:  # a header-less discover probe has none to check
            refused = modern.missing_envelope(rid, msg.get("params"))
            if refused is not None:  # checked before the headers, as the spec orders them
                return _json("400 Bad Request", refused)
            try:
                modern_headers.check(environ, msg, self._tool_schema(msg, environ.get(CLIENT_KEY)))
            except HeaderMismatch as exc:
                return _json("400 Bad Request", jsonrpc.error(rid, HEADER_MISMATCH, str(exc)))
        call = self._open(rid, method == LISTEN, environ.get(CLIENT_KEY), wants_sse, environ)
        if call is None:
            return _json("503 Service Unavailable", jsonrpc.error(rid, jsonrpc.SERVER_UNAVAILABLE,
                                                                  "troupe is shutting down"))
        if not self._send(call, {**msg, "id": call.our_id}, principal(environ)):
            self._forget(call)
            return _json("503 Service Unavailable", jsonrpc.error(rid, jsonrpc.SERVER_UNAVAILABLE,
                                                                  "troupe is shutting down"))
        watcher = None
        committed = False
        try:
            wait = REPLY_TIMEOUT if not wants_sse else DEFER_SSE_S
            first = self._next(call, QUICK_S, drop_notifications=not wants_sse)
            if first is None:  # not a quick answer: from now on a hang-up cancels it
                watcher = _HangupWatch.start(environ, call)
                first = self._next(call, wait - QUICK_S, drop_notifications=not wants_sse)
            json_ok = not wants_sse or "application/json" in accept or "*/*" in accept
            if first is None and not wants_sse:  # unanswered: `finally` cancels it upstream
                return _json("200 OK", jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, "troupe: no answer in time"))
            if first is HUNG_UP:
                return "200 OK", [], b""  # nobody reads it; `finally` cancels the call
            if isinstance(first, dict) and "method" not in first and json_ok:
                call.answered = True
                answer = outward(call, first)
                error = answer.get("error")
                code = error.get("code") if isinstance(error, dict) else None
                if code == jsonrpc.RATE_LIMITED and is_refusal(answer):  # HTTP says so too, and when to retry
                    return TOO_MANY, [("Content-Type", "application/json"), retry_after_header(answer)], \
                        jsonrpc.encode(answer)
                return _json(STATUS.get(code, "200 OK") if isinstance(code, int) else "200 OK", answer)
            if first is _CLOSING and not wants_sse:
                call.answered = True
                return _json("503 Service Unavailable", self._closing_answer(call))
            committed = True
            if watcher is None:
                watcher = _HangupWatch.start(environ, call)
            return "200 OK", list(sse.HEADERS), self._stream(call, first, watcher)
        finally:
            if not committed:
                self._finish(call, watcher)

    def _stream(self, call: ModernCall, first, watcher) -> Iterator[bytes]:
        """The SSE answer: what the Session sends ahead of the answer, keep-alive comments while
        it works, then the answer. A client hang-up (or a failed write) cancels the call."""
        deadline = None if call.listen else time.monotonic() + REPLY_TIMEOUT
        item = first
        try:
            while True:
                if item is HUNG_UP:
                    return
                if item is _CLOSING:
                    call.answered = True
                    yield sse.event(self._closing_answer(call), name="message")
                    return
                if item is None:
                    if deadline is not None and time.monotonic() > deadline:
                        yield sse.event(jsonrpc.error(call.client_id, jsonrpc.INTERNAL_ERROR,
                                                      "troupe: no answer in time"), name="message")
                        return
                    yield sse.comment()
                elif type(item) is bytes:  # encoded by call.deliver, ahead of the answer
                    yield item
                else:
                    yield sse.event(outward(call, item), name="message")
                    if "method" not in item:
                        call.answered = True
                        return
                item = self._next(call, sse.KEEPALIVE_S)
        finally:
            self._finish(call, watcher)

    def _next(self, call: ModernCall, timeout: float, drop_notifications: bool = False):
        """The next thing for this call: a message, a sentinel, or None when `timeout` passed.
        Waits in slices: a Session that died with the call in it answers it with an error."""
        ends = time.monotonic() + timeout
        while True:
            left = ends - time.monotonic()
            item = call.replies.get(timeout=max(0.0, min(left, SESSION_CHECK_S)))
            if item is EMPTY:
                if left <= SESSION_CHECK_S:
                    return None
                if call.session is not None and not call.session.is_alive():
                    self._session_died(call.session)
                continue
            # A JSON answer has no room for what precedes it (progress, logs): those are dropped.
            if not (drop_notifications and isinstance(item, dict) and "method" in item):
                return item

    def _closing_answer(self, call: ModernCall) -> dict:
        """What an open request gets when troupe stops: a listen ends gracefully (its result),
        anything else with an error."""
        if call.listen:
            return jsonrpc.result(call.client_id, {"resultType": "complete", "_meta": {
                SUBSCRIPTION_META: call.client_id, modern.META_SERVER_INFO: mcp.SERVER_INFO}})
        return jsonrpc.error(call.client_id, jsonrpc.SERVER_UNAVAILABLE, "troupe is shutting down")

    def _tool_schema(self, msg: dict, client):
        """The inputSchema troupe lists for the called tool (flat mode), for the Mcp-Param-* rule:
        as the client's profile shows it (a hidden tool has none, and is unknown to the Session)."""
        params = msg.get("params")
        if msg.get("method") != "tools/call" or not isinstance(params, dict) or self.rt.config.serve.mode != "flat":
            return None
        name = params.get("name")
        cat = views.view(self.rt.catalogue(), views.profile_of(self.rt.config, client))
        entry = cat.tool(name) if isinstance(name, str) else None
        return None if entry is None else entry.definition.get("inputSchema")

    # ---------------------------------------------------------------- the table and the Session

    def _open(self, client_id, listen: bool, client=None, stream: bool = False, environ=None) -> ModernCall | None:
        """A new call in the table, bound to its client's live Session (started if there is none):
        one lock taken per request for both, not one each."""
        with self._lock:
            if self._closed:
                return None
            call = ModernCall(client_id, f"h{next(self._ids)}", listen, self._live_session(client), client, stream,
                         self.rt.config.serve.stream_buffer_bytes, self.streams)
            self._calls[call.our_id] = call
        if stream:
            call.replies.on_overflow = lambda: overflowed(call, environ)
        return call

    def _live_session(self, client):
        """`client`'s modern Session, started if there is none (the caller holds the lock)."""
        key = client.name if client is not None else None
        ref = self._sessions.get(key)
        if ref is None:
            born: list = []  # the new ref, for its failure hook: a failed Session's calls are answered at once

            def failed(why: str) -> None:  # the failed Session's greenlet: hand over, never take the lock here
                if born:
                    gevent.spawn(self._session_died, born[0])
            ref = self._sessions[key] = Session.start(self.rt, notify=None, client=client, on_failed=failed,
                                                      key=f"http-modern-{next(self._generations)}")
            born.append(ref)
        return ref

    def _forget(self, call: ModernCall) -> None:
        with self._lock:
            self._calls.pop(call.our_id, None)

    def _finish(self, call: ModernCall, watcher) -> None:
        """The response is over: an unanswered call is cancelled (closing the response is the cancel)."""
        if watcher is not None:
            watcher.stop()
        if call.closer is not None:
            call.closer.kill(block=False)
        call.replies.close()  # what still waits goes now
        self._forget(call)
        if not call.answered and call.session is not None:
            cancel = jsonrpc.notification("notifications/cancelled", {
                "requestId": call.our_id, "reason": "the client closed the response"})
            tell(call.session, ClientMessage(cancel, _ignore))  # False: its Session is gone, its calls with it

    def _send(self, call: ModernCall, message: dict, who: str = "http") -> bool:
        """Hand the request to the Session _open bound it to; a dead one is replaced once (its open
        calls answered with an error, since no answer will come from it; this one is sent again)."""
        for attempt in range(2):
            ref = call.session
            try:
                ref.tell(ClientMessage(message, call.deliver, who))
                return True
            except pykka.ActorDeadError:
                call.session = None  # not among the orphans: it never reached that Session
                self._session_died(ref)
            if attempt:
                break
            with self._lock:
                if self._closed:
                    return False
                call.session = self._live_session(call.client)
        return False

    def _session_died(self, ref) -> None:
        with self._lock:
            key = next((k for k, v in self._sessions.items() if v is ref), _ABSENT)
            if key is _ABSENT:
                return  # someone noticed first and answered its calls already
            del self._sessions[key]
            orphans = [c for c in self._calls.values() if c.session is ref]
        logger.warning("http: the modern Session stopped; {} open request(s) answered with an error", len(orphans))
        for call in orphans:
            call.replies.put(jsonrpc.error(call.our_id, jsonrpc.INTERNAL_ERROR, "troupe: its session stopped"))

    def close(self) -> list:
        """troupe stops: every open request is ended (a listen gracefully), the Sessions stopped.
        Returns their refs (to wait for)."""
        with self._lock:
            self._closed = True
            calls, refs, self._sessions = list(self._calls.values()), list(self._sessions.values()), {}
        for call in calls:
            call.replies.put(_CLOSING)
        for ref in refs:
            tell(ref, ClientGone("troupe shutting down"))  # False: that one has stopped already
        return refs

    def summary(self) -> dict:
        """The `modern` figure of GET /status: stateless requests in flight, listen streams among them."""
        with self._lock:
            calls = list(self._calls.values())
        return {"in_flight": len(calls), "listening": sum(c.listen for c in calls)}

