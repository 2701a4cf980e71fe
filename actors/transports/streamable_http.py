"""Streamable HTTP client transport: the session era (MCP 2025-03-26 … 2025-11-25) and the
stateless one (2026-07-28), chosen per message by the `_meta` envelope the Connection adds."""
from __future__ import annotations

import time
from typing import Any, Mapping

import gevent
import requests
import sseclient
from loguru import logger

from actors.protocol import jsonrpc, modern_client
from actors.redact import redact_url
from actors.transports.base import OnClosed, OnMessage, OnStream, TransportGarbage
from actors.transports.http_base import (DEFAULT_CONNECT_TIMEOUT, ERROR_BODY_LIMIT, JSON_MEDIA_TYPE,
                                         POST_READ_TIMEOUT, HttpTransportBase, describe_exc, error_detail,
                                         link_broken, media_type)
from actors.transports.sse_stream import SSE_MEDIA_TYPE, StreamCursor, parse_payload, sse_events

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
POST_ACCEPT = f"{JSON_MEDIA_TYPE}, {SSE_MEDIA_TYPE}"
# A request's answer may take as long as the tool runs; the per-request deadline
# lives in the Connection actor. This only bounds a greenlet left on a dead peer.
REQUEST_READ_TIMEOUT = 600.0
# The GET stream may be silent for long; reconnecting this often (with
# Last-Event-ID, so nothing is lost) also notices a half-open connection.
GET_STREAM_READ_TIMEOUT = 300.0
# Consecutive failed GET attempts after which we live without the GET stream.
GET_STREAM_MAX_FAILURES = 5
# A GET stream that stayed up this long (or carried events) was healthy.
GET_STREAM_HEALTHY_AFTER = 5.0
# Attempts to resume a POST's broken stream with GET + Last-Event-ID.
RESUME_MAX_ATTEMPTS = 5
# After a POST stream delivered its response, the server should end it; reading
# the end lets the connection go back to the pool, waiting longer is not worth it.
POST_STREAM_TAIL = 1.0
# close() sends DELETE for the session; a server that does not answer fast is not waited for.
DELETE_TIMEOUT = 1.0
_NO_BODY = (202, 204)  # status codes that mean "no response body by design"


def _answers(message: Any, request_id: Any) -> bool:
    if isinstance(message, TransportGarbage):  # an answer refused at parse (too deep) answers it still
        return message.request_id is not None and message.request_id == request_id
    return (isinstance(message, dict) and "method" not in message
            and ("result" in message or "error" in message) and message.get("id") == request_id)


def _modern(message: dict) -> bool:
    """A request in the stateless era's envelope: sent without a session, with its own headers."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and modern_client.META_VERSION in meta


def _visible_ascii(value: str) -> bool:
    return bool(value) and all(0x21 <= ord(c) <= 0x7E for c in value)


class StreamableHttpTransport(HttpTransportBase):
    """One MCP endpoint: POST each message, read JSON or SSE back, plus an optional
    GET stream for what the server sends unasked.

    on_closed fires once when the server forgets our session (404, or the 400
    some servers send for an unknown id): the owner re-initialises with a new
    transport. A dead server is not final: each request gets a synthetic error.
    """

    def __init__(self, name: str, url: str, headers: Mapping[str, str], on_message: OnMessage,
                 on_closed: OnClosed, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, log=logger, **auth):
        super().__init__(name, url, headers, on_message, on_closed,
                         connect_timeout=connect_timeout, log=log, **auth)  # auth, auth_settings: OAuth
        self._session_id: str | None = None
        self._protocol_version: str | None = None
        self._initialized = False  # a successful initialize response was seen
        self._listening = False  # the GET stream greenlet was started
        self._tool_headers: Mapping[str, tuple] = {}  # tool → its Mcp-Param-* map (modern era)
        self._calls: dict[Any, gevent.Greenlet] = {}  # modern requests in flight: closing one cancels it

    def open(self) -> None:
        # Nothing to connect before the initialize POST: a server that is down
        # shows up as a synthetic error answer to that request.
        self._check_open()

    def set_protocol_version(self, version: str) -> None:
        self._protocol_version = version

    def set_tool_headers(self, maps: Mapping[str, tuple]) -> None:
        """The x-mcp-header map of each tool (from the Connection's last tools list): a modern
        tools/call mirrors those arguments into Mcp-Param-* headers."""
        self._tool_headers = dict(maps)

    @property
    def _stateless(self) -> bool:
        return self._protocol_version in modern_client.MODERN_VERSIONS

    # -- headers ------------------------------------------------------------------

    def _session_headers(self, headers: dict) -> dict:
        if self._session_id:
            headers[SESSION_HEADER] = self._session_id
        if self._protocol_version:
            headers[VERSION_HEADER] = self._protocol_version
        return headers

    def _post_headers(self, message: dict) -> dict:
        headers = self._with_bearer({**self._headers, "Content-Type": JSON_MEDIA_TYPE, "Accept": POST_ACCEPT},
                                    message)
        if _modern(message):  # no session: the headers mirror this request alone
            return {**headers, **modern_client.request_headers(message, self._tool_headers)}
        return self._session_headers(headers)

    def _session_gone(self, status: int, detail: str) -> bool:
        """The server no longer knows our session: the spec says 404; the TypeScript
        SDK's example routing (server-everything included) answers 400 "No valid
        session ID provided" instead, which would otherwise wedge the link."""
        if not self._session_id:
            return False
        return status == 404 or (status == 400 and "session" in detail.lower())

    # -- POST -----------------------------------------------------------------------

    def _dispatch(self, message: dict) -> None:
        if jsonrpc.is_request(message):
            call = self._greenlets.spawn(self._post_request, message)
            if _modern(message):
                self._calls[message["id"]] = call
        elif self._stateless:
            self._stateless_notice(message)
        else:
            self._post_other(message)

    def _stateless_notice(self, message: dict) -> None:
        """The stateless era has no client→server notifications on HTTP: a cancellation closes
        the request's own response; anything else has nowhere to go."""
        params = message.get("params")
        call = self._calls.pop(params.get("requestId"), None) if isinstance(params, dict) and \
            message.get("method") == "notifications/cancelled" else None
        if call is not None:
            call.kill(block=False)  # _tracked closes its response: that is the cancel
        else:
            self._log.debug("not sent to a stateless server: {}", message.get("method") or "response")

    def _post(self, message: dict, read_timeout: float) -> requests.Response:
        return self._fresh(lambda: self._http.post(self.url, data=jsonrpc.encode(message), stream=True,
                                                   headers=self._post_headers(message),  # the bearer of now
                                                   timeout=(self._connect_timeout, read_timeout)),
                           self._client_of(message))

    def _post_request(self, message: dict) -> None:
        try:
            try:
                resp = self._post(message, REQUEST_READ_TIMEOUT)
            except requests.RequestException as exc:
                self._fail(message, f"POST {redact_url(self.url)} failed: {describe_exc(exc)}",
                           broken=link_broken(exc))
                return
            with self._tracked(resp):
                failure = self._read_answer(message, resp)
            if failure is not None:
                self._fail(message, *failure)
        finally:
            self._sent(message)
            if self._calls.get(message["id"]) is gevent.getcurrent():
                del self._calls[message["id"]]

    def _modern_refusal(self, message: dict, resp: requests.Response) -> bool:
        """A stateless server refuses with a JSON-RPC error body (400 for a version or header
        problem, 404 for an unknown method): that error is the answer, with the HTTP status."""
        if not _modern(message):
            return False
        try:
            body = jsonrpc.decode(resp.raw.read(ERROR_BODY_LIMIT, decode_content=True))
        except Exception:  # an HTML page or nothing: the status line is all there is
            return False
        if not modern_client.is_modern_error_body(body):
            return False
        error = dict(body["error"])
        data = error.get("data")
        if data is None or isinstance(data, dict):
            error["data"] = {**(data or {}), "httpStatus": resp.status_code}
        self._deliver({"jsonrpc": "2.0", "id": message["id"], "error": error})
        return True

    def _read_answer(self, message: dict, resp: requests.Response) -> tuple[str, int | None] | None:
        """Deliver what the server answered; return why not, if the request is still unanswered."""
        status = resp.status_code
        if self._needs_auth(resp, message):
            return None  # the owner fails every pending request on on_closed (a client's 401: answered)
        if status >= 400 and self._modern_refusal(message, resp):
            return None
        if status >= 300:
            detail = error_detail(resp)
            # A client's own request (auth: per_client) refused on troupe's session: a server that
            # binds sessions to one user refuses that client alone; the link stays for the others.
            if self._session_gone(status, detail) and self._client_of(message) is None:
                self._report_closed(f"session expired ({status})")
                return None  # the owner fails every pending request on on_closed
            return detail, status
        if status in _NO_BODY:
            return f"HTTP {status} but a request needs an answer", status
        if message.get("method") == "initialize":
            self._capture_session(resp)
        kind = media_type(resp)
        if kind == JSON_MEDIA_TYPE:
            answered = self._deliver_json(message, resp)
        elif kind == SSE_MEDIA_TYPE:
            answered = self._read_post_stream(message, resp)
        else:
            return f"unexpected Content-Type {kind or 'none'}", status
        if answered or self._gone:
            return None
        return "the response ended before the answer", status

    def _capture_session(self, resp: requests.Response) -> None:
        session_id = resp.headers.get(SESSION_HEADER)
        if session_id is None:
            return
        if _visible_ascii(session_id):
            self._session_id = session_id
        else:
            self._log.warning("ignoring a session id that is not visible ASCII")

    def _deliver_json(self, message: dict, resp: requests.Response) -> bool:
        request_id, answered = message["id"], False
        try:
            body = resp.content
        except requests.RequestException as exc:
            if not self._closing:
                self._log.warning("reading the answer to {} failed: {}", message["method"], describe_exc(exc))
            return False
        for item in parse_payload(body):
            if isinstance(item, TransportGarbage):
                # The body answered this POST, so the garbage is that request's answer.
                item, answered = TransportGarbage(item.reason, request_id), True
            elif _answers(item, request_id):
                answered = True
                self._note_answer(message, item)
            self._deliver(item)
        return answered

    def _note_answer(self, message: dict, answer: dict) -> None:
        if message.get("method") == "initialize" and "result" in answer:
            self._initialized = True

    def _post_other(self, message: dict) -> None:
        """Notifications and responses: the server acknowledges them with 202."""
        try:
            resp = self._post(message, POST_READ_TIMEOUT)
        except requests.RequestException as exc:
            self._fail(message, f"POST {redact_url(self.url)} failed: {describe_exc(exc)}")
            return
        with self._tracked(resp):
            status = resp.status_code
            if self._needs_auth(resp):
                return
            if status >= 300:
                detail = error_detail(resp)
                if self._session_gone(status, detail):
                    self._report_closed(f"session expired ({status})")
                else:
                    self._fail(message, detail, status)
                return
            if media_type(resp) == SSE_MEDIA_TYPE:
                # Not ours to wait on in the writer greenlet; the spec says 202 here.
                self._log.debug("ignoring a stream sent for {}", message.get("method"))
                return
            for item in parse_payload(resp.content) if resp.content else ():
                self._deliver(item)
        # The TypeScript SDK opens the GET stream at this point too: the server
        # may not send requests before it has seen `initialized`.
        if message.get("method") == "notifications/initialized" and self._initialized:
            self._start_listening()

    # -- SSE streams ------------------------------------------------------------------

    def _take(self, event: sseclient.Event, cursor: StreamCursor, request: dict | None,
              stream_of: dict | None = None) -> bool:
        """Deliver one event; True if it carried the answer to request. A server's request on it
        is marked as on the stream of `stream_of` (default: `request`): the call it belongs to."""
        stream_of = stream_of or request
        cursor.note(event)
        if event.event != "message" or not event.data:
            return False  # priming events carry only an id (and maybe retry)
        answered = False
        for item in parse_payload(event.data):
            if request is not None and _answers(item, request["id"]):
                answered = True
                self._note_answer(request, item)
            if stream_of is not None and isinstance(item, dict) and "method" in item and "id" in item:
                self._deliver(OnStream(item, stream_of["id"]))  # the server asks on this call's stream
            else:
                self._deliver(item)
        return answered

    def _pump(self, resp: requests.Response, cursor: StreamCursor, request: dict | None = None) -> bool:
        """Read events until the stream ends (or shortly after the answer); True if answered."""
        events = sse_events(resp)
        answered = False
        try:
            for event in events:
                if self._take(event, cursor, request):
                    answered = True
                    break
            if answered:
                with gevent.Timeout(POST_STREAM_TAIL, False):  # pyright: ignore[reportArgumentType]  # stubs lack documented False
                    for event in events:  # after the answer, still this call's stream
                        self._take(event, cursor, None, stream_of=request)
        except Exception as exc:  # the link broke mid-stream; the caller decides about resuming
            if not self._closing:
                self._log.debug("stream broke: {}", describe_exc(exc))
        return answered

    def _read_post_stream(self, message: dict, resp: requests.Response) -> bool:
        cursor = StreamCursor()
        answered = self._pump(resp, cursor, message)
        attempts = 0
        # Resumable only if the server gave event ids; then GET + Last-Event-ID
        # replays this stream from where it broke.
        while not answered and cursor.last_event_id and not self._gone and not self._closing:
            attempts += 1
            if attempts > RESUME_MAX_ATTEMPTS:
                break
            gevent.sleep(cursor.delay(attempts))
            before = cursor.last_event_id
            resumed, status = self._open_get(cursor.last_event_id)
            if resumed is None:
                if status == 405:
                    break
                continue
            with self._tracked(resumed):
                answered = self._pump(resumed, cursor, message)
            if cursor.last_event_id != before:
                attempts = 0  # progress: the server is alive and replaying
        return answered

    def _open_get(self, last_event_id: str | None) -> tuple[requests.Response | None, int | None]:
        """GET an event stream; (response, 200) or (None, status or None)."""
        headers = self._session_headers(self._with_bearer({**self._headers, "Accept": SSE_MEDIA_TYPE}))
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        try:
            resp = self._http.get(self.url, headers=headers, stream=True,
                                  timeout=(self._connect_timeout, GET_STREAM_READ_TIMEOUT))
        except requests.RequestException as exc:
            self._log.debug("GET stream: {}", describe_exc(exc))
            return None, None
        if resp.status_code == 200 and media_type(resp) == SSE_MEDIA_TYPE:
            return resp, 200
        with self._tracked(resp):
            if self._needs_auth(resp):
                return None, 401
            detail = error_detail(resp)
        if self._session_gone(resp.status_code, detail):
            self._report_closed(f"session expired ({resp.status_code})")
        elif resp.status_code != 405:
            self._log.debug("GET stream refused: {}", detail)
        return None, resp.status_code

    def _start_listening(self) -> None:
        if not self._listening and not self._closing:
            self._listening = True
            self._greenlets.spawn(self._listen)

    def _listen(self) -> None:
        """The optional GET stream for requests and notifications the server sends unasked."""
        cursor, failures = StreamCursor(), 0
        while not self._closing and not self._gone:
            resp, status = self._open_get(cursor.last_event_id)
            if status == 405:
                self._log.debug("server offers no GET stream")
                return
            if resp is not None:
                started, seen = time.monotonic(), cursor.last_event_id
                with self._tracked(resp):
                    self._pump(resp, cursor)
                healthy = (cursor.last_event_id != seen
                           or time.monotonic() - started >= GET_STREAM_HEALTHY_AFTER)
                failures = 0 if healthy else failures + 1
            else:
                failures += 1
            if self._closing or self._gone:
                return
            if failures >= GET_STREAM_MAX_FAILURES:
                self._log.warning("giving up on the GET stream after {} failures", failures)
                return
            gevent.sleep(cursor.delay(max(failures, 1)))

    # -- close ------------------------------------------------------------------------

    def _end_session(self) -> None:
        if not self._session_id or self._gone:
            return  # no session, or the server already forgot it
        headers = self._session_headers(self._with_bearer(dict(self._headers)))
        # Swallowing form: a slow DNS lookup or server cannot hold close() past its bound.
        with gevent.Timeout(DELETE_TIMEOUT, False):  # pyright: ignore[reportArgumentType]  # stubs lack documented False
            try:
                resp = self._http.delete(self.url, headers=headers, timeout=(DELETE_TIMEOUT, DELETE_TIMEOUT))
                resp.close()
                if resp.status_code not in (200, 202, 204, 405):
                    self._log.debug("DELETE session answered HTTP {}", resp.status_code)
            except requests.RequestException as exc:
                self._log.debug("DELETE session failed: {}", describe_exc(exc))
