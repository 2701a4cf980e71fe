"""Integration tests: the Streamable HTTP and legacy SSE transports against real peers."""
# Runs in-process and gevent-patched like the rest of tests/integration
# (TROUPE_TEST_GEVENT=1: tests/conftest.py patches, tests/integration/conftest.py
# refuses to run otherwise), so readers here are greenlets exactly as in production.
import json
import os
import time

import gevent
import gevent.event
import gevent.queue
import pytest
import requests
from gevent.pywsgi import WSGIServer

from actors.protocol import jsonrpc
from actors.transports.base import LinkFailure, TransportError, TransportGarbage
from actors.transports.legacy_sse import SseTransport
from actors.transports.streamable_http import StreamableHttpTransport
from tests.support import wait_until

LATEST = "2025-11-25"
LEGACY = "2024-11-05"
# Bounds, not sleeps: how long an answer may take to arrive, close() to return
# (the transport contract says under 2 s). Peers: the peer fixture in conftest.py.
ANSWER_TIMEOUT = 10.0
CLOSE_BOUND = 2.0
NAME = "upstream"
CLOSED_BY_OWNER = "closed by troupe"
SECRET = "s3cret-token"

# ---------------------------------------------------------------------------
# Helpers: an owner that collects callbacks, as the Connection actor would.
# ---------------------------------------------------------------------------


@pytest.fixture
def made():
    """Transports a test makes are closed even when it fails, so no reader outlives it."""
    transports = []
    yield transports
    for transport in transports:
        transport.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class Owner:
    """Collects what a transport hands back, as the Connection actor would."""

    def __init__(self):
        self.inbox: gevent.queue.Queue = gevent.queue.Queue()
        self.closed: list[str] = []

    def on_message(self, message):
        self.inbox.put(message)

    def on_closed(self, reason):
        self.closed.append(reason)

    def next(self, timeout=ANSWER_TIMEOUT):
        try:
            return self.inbox.get(timeout=timeout)
        except gevent.queue.Empty:
            raise AssertionError(f"nothing arrived within {timeout}s") from None

    def answer(self, request_id, timeout=ANSWER_TIMEOUT):
        """The answer to request_id, and what arrived before it."""
        before, deadline = [], time.monotonic() + timeout
        while True:
            message = self.next(max(0.01, deadline - time.monotonic()))
            if isinstance(message, dict) and "method" not in message and message.get("id") == request_id:
                return message, before
            before.append(message)


def handshake(transport, owner, version=LATEST) -> dict:
    transport.send(jsonrpc.request(1, "initialize", {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "troupe-test", "version": "0"}}))
    answer, _ = owner.answer(1)
    assert "result" in answer, answer
    transport.set_protocol_version(answer["result"]["protocolVersion"])
    transport.send(jsonrpc.notification("notifications/initialized"))
    return answer["result"]


def call(transport, owner, request_id, tool, arguments, meta=None):
    params = {"name": tool, "arguments": arguments}
    if meta:
        params["_meta"] = meta
    transport.send(jsonrpc.request(request_id, "tools/call", params))
    return owner.answer(request_id)


def text_of(answer) -> str:
    assert "result" in answer, answer
    return " ".join(c.get("text", "") for c in answer["result"]["content"])


def progress_of(messages, token) -> list:
    return [m["params"]["progress"] for m in messages
            if isinstance(m, dict) and m.get("method") == "notifications/progress"
            and m["params"].get("progressToken") == token]


def close_and_check(transport, owner, base_fds) -> float:
    started = time.monotonic()
    transport.close()
    elapsed = time.monotonic() - started
    assert elapsed < CLOSE_BOUND, f"close() took {elapsed:.2f}s"
    transport.close()  # idempotent
    assert owner.closed[-1] == CLOSED_BY_OWNER and owner.closed.count(CLOSED_BY_OWNER) == 1, owner.closed
    assert not transport._streams, "a streamed response was left open"
    wait_until(lambda: open_fds() <= base_fds, timeout=CLOSE_BOUND, message=f"fds back to {base_fds}")
    try:
        transport.send(jsonrpc.notification("notifications/initialized"))
    except TransportError:
        pass
    else:
        raise AssertionError("send() after close() did not raise")
    return elapsed


def get_stream_open(transport) -> bool:
    return any(r.request.method == "GET" for r in list(transport._streams))


def spy_resumes(transport) -> list:
    """Record each Last-Event-ID the transport resumes from."""
    resumes, original = [], transport._open_get

    def open_get(last_event_id):
        if last_event_id:
            resumes.append(last_event_id)
        return original(last_event_id)

    transport._open_get = open_get
    return resumes


TOOLS = {  # kind → (echo-like tool, arguments, expected text)
    "everything-http": ("echo", {"message": "hi troupe"}, "hi troupe"),
    "everything-sse": ("echo", {"message": "hi troupe"}, "hi troupe"),
    "fastmcp-http": ("echo", {"message": "hi troupe"}, "Echo: hi troupe"),
    "fastmcp-json": ("echo", {"message": "hi troupe"}, "Echo: hi troupe"),
    "fastmcp-sse": ("echo", {"message": "hi troupe"}, "Echo: hi troupe"),
    "fastmcp-demo": ("greet", {"name": "troupe"}, "Hello, troupe!"),
}


# ---------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["everything-http", "fastmcp-http", "fastmcp-json", "fastmcp-demo"])
def test_streamable_http_round_trip(peer, made, kind):
    url = peer(kind)
    owner, base = Owner(), open_fds()
    t = StreamableHttpTransport(NAME, url, {"X-Troupe-Test": "1"}, owner.on_message, owner.on_closed)
    made.append(t)
    t.open()
    assert t.describe() == {"url": url}
    result = handshake(t, owner)
    assert result["protocolVersion"] == LATEST
    assert t._session_id, "no Mcp-Session-Id captured from the initialize response"
    t.send(jsonrpc.request(2, "tools/list"))
    answer, _ = owner.answer(2)
    names = {tool["name"] for tool in answer["result"]["tools"]}
    tool, arguments, expected = TOOLS[kind]
    assert tool in names, names
    answer, _ = call(t, owner, 3, tool, arguments)
    assert expected in text_of(answer)
    if kind == "everything-http":
        # Progress rides the POST's SSE stream, before the result.
        answer, before = call(t, owner, 4, "trigger-long-running-operation",
                              {"duration": 1, "steps": 3}, {"progressToken": "tok-4"})
        assert progress_of(before, "tok-4") == [1, 2, 3], before
        assert "completed" in text_of(answer)
        # A notification unrelated to any request can only come over the GET stream.
        wait_until(lambda: get_stream_open(t), timeout=ANSWER_TIMEOUT, message="the GET stream")
        answer, before = call(t, owner, 5, "toggle-simulated-logging", {})
        assert "result" in answer, answer
        logged = [m for m in before if m.get("method") == "notifications/message"]
        while not logged:
            message = owner.next()
            if message.get("method") == "notifications/message":
                logged.append(message)
        assert get_stream_open(t)
    elif kind == "fastmcp-http":
        # The tool drops its stream after the first progress: only a resume with
        # GET + Last-Event-ID (after the server's retry) brings the rest.
        resumes = spy_resumes(t)
        answer, before = call(t, owner, 4, "progress_then_drop", {"steps": 3}, {"progressToken": "tok-4"})
        assert text_of(answer) == "done after 3 steps"
        assert progress_of(before, "tok-4") == [1, 2, 3], before
        assert resumes, "the answer arrived without resuming the stream"
    elif kind == "fastmcp-json":
        answer, before = call(t, owner, 4, "progress_then_drop", {"steps": 3}, {"progressToken": "tok-4"})
        assert text_of(answer) == "done after 3 steps"
        # With JSON answers the SDK has no stream to put progress on; any that
        # arrives must still come before the answer.
        assert progress_of(before, "tok-4") in ([], [1, 2, 3]), before
    wait_until(lambda: t._listening, timeout=ANSWER_TIMEOUT, message="the GET stream to start")
    close_and_check(t, owner, base)


@pytest.mark.parametrize("kind", ["everything-sse", "fastmcp-sse"])
def test_legacy_sse_round_trip(peer, made, kind):
    url = peer(kind)
    owner, base = Owner(), open_fds()
    t = SseTransport(NAME, url, {"X-Troupe-Test": "1"}, owner.on_message, owner.on_closed)
    made.append(t)
    t.open()
    assert t.describe() == {"url": url}
    handshake(t, owner, LEGACY)
    t.send(jsonrpc.request(2, "tools/list"))
    answer, _ = owner.answer(2)
    tool, arguments, expected = TOOLS[kind]
    assert tool in {tool["name"] for tool in answer["result"]["tools"]}
    answer, _ = call(t, owner, 3, tool, arguments)
    assert expected in text_of(answer)
    if kind == "everything-sse":
        answer, before = call(t, owner, 4, "trigger-long-running-operation",
                              {"duration": 1, "steps": 3}, {"progressToken": "tok-4"})
        assert progress_of(before, "tok-4") == [1, 2, 3], before
    close_and_check(t, owner, base)


def test_close_wakes_blocked_readers(peer, made):
    owner, base = Owner(), open_fds()
    t = StreamableHttpTransport(NAME, peer("everything-http"), {}, owner.on_message, owner.on_closed)
    made.append(t)
    handshake(t, owner)
    wait_until(lambda: get_stream_open(t), timeout=ANSWER_TIMEOUT, message="the GET stream")
    t.send(jsonrpc.request(2, "tools/call", {
        "name": "trigger-long-running-operation", "arguments": {"duration": 60, "steps": 60},
        "_meta": {"progressToken": "slow"}}))
    first = owner.next()
    assert first.get("method") == "notifications/progress", first
    # Now one reader sits in read1 on the POST stream, another on the GET stream.
    wait_until(lambda: len([g for g in t._greenlets if g is not t._writer]) == 2, message="two readers")
    readers = [g for g in t._greenlets if g is not t._writer]
    assert len(t._streams) == 2, t._streams
    close_and_check(t, owner, base)
    # Shutting the sockets down let the readers leave on their own: none was killed.
    assert all(g.dead and not isinstance(g.value, gevent.GreenletExit) for g in readers), readers
    leftover = []
    while not owner.inbox.empty():
        leftover.append(owner.inbox.get_nowait())
    assert all(m.get("id") != 2 for m in leftover), "request 2 was answered after close()"


@pytest.mark.parametrize("kind,status", [("fastmcp-http", 404), ("everything-http", 400)])
def test_expired_session_closes_transport(peer, made, kind, status):
    url = peer(kind)
    owner = Owner()
    t = StreamableHttpTransport(NAME, url, {}, owner.on_message, owner.on_closed)
    made.append(t)
    handshake(t, owner)
    # The server forgets the session behind the transport's back.
    requests.delete(url, headers={"Mcp-Session-Id": t._session_id, "MCP-Protocol-Version": LATEST},
                    timeout=5).close()
    try:
        t.send(jsonrpc.request(2, "tools/list"))
    except TransportError:
        pass  # the GET stream, dropped by the server, may have noticed first
    wait_until(lambda: owner.closed, timeout=ANSWER_TIMEOUT, message="on_closed")
    try:
        t.send(jsonrpc.request(3, "tools/list"))
    except TransportError:
        pass
    else:
        raise AssertionError("send() after the session expired did not raise")
    # 404 is the spec's answer; server-everything's routing answers 400 instead.
    assert owner.closed == [f"session expired ({status})"]
    t.close()
    assert len(owner.closed) == 1, "on_closed called twice"


def test_dead_server_answers_request_with_error(made, dead_port):
    port = dead_port
    owner, base = Owner(), open_fds()
    url = f"http://user:{SECRET}@127.0.0.1:{port}/mcp?token={SECRET}"
    t = StreamableHttpTransport(NAME, url, {"Authorization": f"Bearer {SECRET}"},
                                owner.on_message, owner.on_closed, connect_timeout=2.0)
    made.append(t)
    assert t.describe() == {"url": f"http://user:***@127.0.0.1:{port}/mcp?token=***"}
    t.send(jsonrpc.notification("notifications/initialized"))  # logged, never answered
    t.send(jsonrpc.request(7, "initialize", {"protocolVersion": LATEST, "capabilities": {}}))
    failure = owner.next()  # refused: the request never left troupe, and the answer says so
    assert isinstance(failure, LinkFailure) and failure.request_id == 7 and failure.sent is False, failure
    assert failure.reason.startswith(f"{NAME}: ") and "refused" in failure.reason, failure
    assert SECRET not in failure.reason
    assert owner.closed == []
    close_and_check(t, owner, base)


def test_http_error_answers_request_with_error(peer, made):
    owner = Owner()
    t = StreamableHttpTransport(NAME, peer("everything-http"), {}, owner.on_message, owner.on_closed)
    made.append(t)
    # No initialize first: server-everything answers 400 "Server not initialized".
    t.send(jsonrpc.request(9, "tools/list"))
    answer, _ = owner.answer(9)
    assert answer["error"]["code"] == jsonrpc.SERVER_UNAVAILABLE
    assert "HTTP 400" in answer["error"]["message"], answer
    assert answer["error"]["data"] == {"httpStatus": 400}
    assert owner.closed == []


def _serve(app) -> WSGIServer:
    server = WSGIServer(("127.0.0.1", 0), app, log=None, error_log=None)
    server.start()
    return server


def _json(start_response, status, body, headers=()):
    data = json.dumps(body).encode() if not isinstance(body, bytes) else body
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers])
    return [data]


def test_fake_streamable_server_headers_batches_get_stream(made):
    seen, gets = [], []  # every request's (method, rpc, headers…); each GET's (time, Last-Event-ID)

    def app(environ, start_response):
        method = environ["REQUEST_METHOD"]
        body = json.loads(environ["wsgi.input"].read() or b"null")
        seen.append((method, (body or {}).get("method"), environ.get("HTTP_X_TROUPE_TEST"),
                     environ.get("HTTP_MCP_SESSION_ID"), environ.get("HTTP_MCP_PROTOCOL_VERSION")))
        if method == "GET":
            gets.append((time.monotonic(), environ.get("HTTP_LAST_EVENT_ID")))
            if len(gets) > 1:  # the reconnect: refuse, which must end the GET stream for good
                start_response("405 Method Not Allowed", [("Content-Length", "0")])
                return [b""]
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return [b'id: e1\nretry: 300\ndata: {"jsonrpc":"2.0","method":"notifications/unasked"}\n\n']
        if method != "POST":
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        rpc = body.get("method")
        if rpc == "initialize":
            return _json(start_response, "200 OK", jsonrpc.result(body["id"], {"protocolVersion": LATEST}),
                         [("Mcp-Session-Id", "fake-session")])
        if rpc == "batch":
            return _json(start_response, "200 OK", [jsonrpc.notification("notifications/message"),
                                                    jsonrpc.result(body["id"], {"ok": True})])
        if rpc == "garbage":
            return _json(start_response, "200 OK", b"{not json")
        if rpc == "no-answer":  # a stream without event ids cannot be resumed
            start_response("200 OK", [("Content-Type", "text/event-stream")])
            return [b'data: {"jsonrpc":"2.0","method":"notifications/message"}\n\n']
        start_response("202 Accepted", [("Content-Length", "0")])
        return [b""]

    base = open_fds()
    server = _serve(app)
    owner, unasked = Owner(), []

    def on_message(message):  # the GET stream's notification may come at any point
        if isinstance(message, dict) and message.get("method") == "notifications/unasked":
            unasked.append(message)
        else:
            owner.on_message(message)

    t = StreamableHttpTransport(NAME, f"http://127.0.0.1:{server.server_port}/mcp", {"X-Troupe-Test": "yes"},
                                on_message, owner.on_closed)
    made.append(t)
    handshake(t, owner)
    t.send(jsonrpc.request(2, "batch"))
    answer, before = owner.answer(2)
    assert answer["result"] == {"ok": True} and before[0]["method"] == "notifications/message"
    t.send(jsonrpc.request(3, "garbage"))
    garbage = owner.next()
    assert isinstance(garbage, TransportGarbage) and garbage.request_id == 3, garbage
    t.send(jsonrpc.request(4, "accepted"))  # a request answered with 202 gets an error
    answer, _ = owner.answer(4)
    assert answer["error"]["data"] == {"httpStatus": 202}, answer
    t.send(jsonrpc.request(5, "no-answer"))
    answer, before = owner.answer(5)
    assert "ended before the answer" in answer["error"]["message"], answer
    assert before[-1]["method"] == "notifications/message", before
    # The GET stream delivered its event, ended, and came back after `retry` with Last-Event-ID.
    wait_until(lambda: unasked, timeout=ANSWER_TIMEOUT, message="the GET stream's notification")
    wait_until(lambda: len(gets) == 2, timeout=ANSWER_TIMEOUT, message="the GET stream to reconnect")
    assert gets[0][1] is None and gets[1][1] == "e1", gets
    assert gets[1][0] - gets[0][0] >= 0.3, "the server's retry was not honoured"
    t.close()
    assert seen[0] == ("POST", "initialize", "yes", None, None), seen[0]
    assert all(s[2] == "yes" for s in seen), "configured header missing"
    assert all(s[3] == "fake-session" and s[4] == LATEST for s in seen[1:]), seen
    assert [s[0] for s in seen].count("GET") == 2, "405 on GET must end the GET stream"
    assert seen[-1][0] == "DELETE", seen
    server.stop(timeout=1)
    wait_until(lambda: open_fds() <= base, timeout=CLOSE_BOUND, message="fds back")


def test_sse_endpoint_checks_and_stream_loss(made, dead_port):
    plan = {}  # path → (events the fake sends on GET, seconds it then holds the stream)
    release = gevent.event.Event()  # ends every held stream, so the fake closes its sockets

    def app(environ, start_response):
        if environ["REQUEST_METHOD"] == "POST":
            return _json(start_response, "500 Internal Server Error",
                         {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "boom"}})
        events, hold = plan[environ["PATH_INFO"]]
        start_response("200 OK", [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")])

        def stream():
            for event in events:
                yield event.encode()
            release.wait(hold)
        return stream()

    base = open_fds()
    server = _serve(app)
    root = f"http://127.0.0.1:{server.server_port}"
    plan["/foreign"] = (["event: endpoint\ndata: http://other.example:9/message\n\n"], 5)
    plan["/other-port"] = ([f"event: endpoint\ndata: http://127.0.0.1:{server.server_port + 1}/m\n\n"], 5)
    plan["/silent"] = ([": just a comment\n\n"], 5)
    plan["/lost"] = (["event: endpoint\ndata: /message?session=1\n\n",
                      'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message"}\n\n'], 1.0)
    refused = f"http://127.0.0.1:{dead_port}/sse"
    for url, timeout, expected in ((root + "/foreign", 5, "another origin"),
                                   (root + "/other-port", 5, "another origin"),
                                   (root + "/silent", 0.5, "no endpoint event"),
                                   (refused, 5, "cannot reach")):
        owner = Owner()
        t = SseTransport(NAME, url, {}, owner.on_message, owner.on_closed, connect_timeout=timeout)
        made.append(t)
        started = time.monotonic()
        with pytest.raises(TransportError, match=expected):
            t.open()
        assert time.monotonic() - started < timeout + 1
        assert owner.closed == [] and not t._streams

    owner = Owner()
    t = SseTransport(NAME, root + "/lost", {}, owner.on_message, owner.on_closed)
    made.append(t)
    t.open()
    assert t._endpoint == root + "/message?session=1"
    assert owner.next()["method"] == "notifications/message"
    t.send(jsonrpc.request(5, "tools/list"))  # the endpoint answers 500
    answer, _ = owner.answer(5)
    assert "HTTP 500" in answer["error"]["message"] and "boom" in answer["error"]["message"], answer
    wait_until(lambda: owner.closed, timeout=ANSWER_TIMEOUT, message="on_closed after the stream ended")
    assert owner.closed == ["sse stream lost (ended by the server)"], owner.closed
    t.close()
    assert len(owner.closed) == 1, "on_closed called twice"
    release.set()
    server.stop(timeout=1)
    wait_until(lambda: open_fds() <= base, timeout=CLOSE_BOUND, message="fds back")
