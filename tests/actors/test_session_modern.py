"""A Session serving 2026-07-28 requests in process, in front of the real echo server: no
initialize, each request served from its own _meta, listen streams, digest cursors that a
second session continues, -32021 to a server asking for an undeclared capability, logs only
with the request."""
from __future__ import annotations

import base64

import pykka
import pytest

from actors.events.kinds import ServerLogged
from actors.messages import ClientGone, ClientMessage, ServerRequest, UpstreamError
from actors.protocol import mcp, modern
from actors.runtime import Runtime
from actors.settings import config
from actors.downstream.session import Session
from tests.support import PYTHON, ROOT, wait_until

ENVELOPE = {modern.META_VERSION: mcp.MODERN, modern.META_CAPABILITIES: {}}
SUB = modern.META_SUBSCRIPTION


@pytest.fixture
def runtime():
    # pin: false: echo__notify_change adds a tool, and a stream is told of a change it can see
    cfg = config.from_data({"servers": [{"name": "echo", "timeout": 5, "pin": False, "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", "tests.servers.echo", "--tools", "600"], "work_dir": str(ROOT)}}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.connection("echo") is not None and rt.settled.is_set(), 15, message="echo ready")
    wait_until(lambda: rt.catalogue().tool("echo__echo") is not None, 15, message="echo listed")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def _request(rid, method, params=None, **meta) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "method": method,
            "params": {**(params or {}), "_meta": {**ENVELOPE, **meta}}}


class _Client:
    """One stream per request, as a modern client sees them, plus the session's unsolicited sink."""

    def __init__(self, runtime, key: str) -> None:
        self.told: list = []
        self.session = Session.start(runtime, notify=self.told.append, key=key, mode="flat")
        self.streams: dict = {}

    def send(self, message: dict) -> list:
        stream = self.streams.setdefault(message.get("id"), [])
        self.session.tell(ClientMessage(message, stream.append))
        return stream

    def answer(self, message: dict, timeout: float = 10.0) -> dict:
        stream = self.send(message)
        wait_until(lambda: any("id" in m and "method" not in m for m in stream), timeout, message=message["method"])
        return next(m for m in stream if "id" in m and "method" not in m)


def test_modern_requests_need_no_initialize_and_lists_page_across_sessions(runtime):
    one, two = _Client(runtime, "m1"), _Client(runtime, "m2")
    first = one.answer(_request(1, "tools/list"))["result"]
    assert first["resultType"] == "complete" and first["cacheScope"] == "public" and first["ttlMs"] > 0
    assert first["_meta"][modern.META_SERVER_INFO]["name"] == "troupe"
    names = [t["name"] for t in first["tools"]]
    assert names == sorted(names) and "nextCursor" in first  # one server: all in name order
    # the cursor is content, not this session's state: another session continues the page
    rest = two.answer(_request(2, "tools/list", {"cursor": first["nextCursor"]}))["result"]
    assert not set(names) & {t["name"] for t in rest["tools"]}
    assert len(names) + len(rest["tools"]) >= 600
    stale = base64.urlsafe_b64encode(b"AAAAAAAAAAAAAAAAAAAAAA:500").decode()
    assert two.answer(_request(3, "tools/list", {"cursor": stale}))["error"]["code"] == -32602
    called = one.answer(_request(4, "tools/call", {"name": "echo__echo", "arguments": {"text": "hi"}}))["result"]
    assert called["content"][0]["text"] == "hi" and called["resultType"] == "complete"
    assert one.told == [] and two.told == []  # nothing unsolicited for a modern client
    one.session.stop()
    two.session.stop()


def test_a_listen_stream_is_acknowledged_gets_its_kinds_and_ends_answered(runtime):
    c = _Client(runtime, "listen")
    stream = c.send(_request("L", "subscriptions/listen", {"notifications": {"toolsListChanged": True}}))
    wait_until(lambda: stream, 5, message="the acknowledgement")
    assert stream[0]["method"] == modern.ACKNOWLEDGED and stream[0]["params"]["_meta"] == {SUB: "L"}
    assert stream[0]["params"]["notifications"] == {"toolsListChanged": True}
    c.answer(_request(5, "tools/call", {"name": "echo__notify_change", "arguments": {}}))
    wait_until(lambda: any(m.get("method") == "notifications/tools/list_changed" for m in stream), 10,
               message="the list change on the stream")
    notice = next(m for m in stream if m.get("method") == "notifications/tools/list_changed")
    assert notice["params"]["_meta"] == {SUB: "L"}
    assert not any("resources" in str(m.get("method")) for m in stream)  # kinds it did not ask for
    assert c.told == []  # never broadcast
    c.session.tell(ClientMessage({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                  "params": {"requestId": "L"}}, c.told.append))
    wait_until(lambda: "id" in stream[-1], 5, message="the listen answered")
    assert stream[-1]["result"]["resultType"] == "complete" and stream[-1]["result"]["_meta"][SUB] == "L"
    # a second stream ends with its client
    other = c.send(_request("M", "subscriptions/listen", {"notifications": {"promptsListChanged": True}}))
    wait_until(lambda: other, 5, message="the second acknowledgement")
    c.session.tell(ClientGone())
    wait_until(lambda: "id" in other[-1], 5, message="the listen answered as its client went")


def test_listen_and_removed_methods_are_refused_by_era(runtime):
    c = _Client(runtime, "eras")
    legacy = c.answer({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
                       "params": {"notifications": {"toolsListChanged": True}}})
    assert legacy["error"]["code"] == -32601
    assert c.answer(_request(2, "subscriptions/listen", {"notifications": []}))["error"]["code"] == -32602
    for rid, method in enumerate(("ping", "logging/setLevel", "resources/subscribe", "initialize"), start=3):
        assert c.answer(_request(rid, method, {"level": "info", "uri": "x:y"}))["error"]["code"] == -32601
    # removed notifications are ignored, and the same session still answers
    c.session.tell(ClientMessage({"jsonrpc": "2.0", "method": "notifications/roots/list_changed",
                                  "params": {"_meta": ENVELOPE}}, c.told.append))
    discovered = c.answer(_request(9, "server/discover"))["result"]
    assert discovered["supportedVersions"][0] == mcp.MODERN and discovered["resultType"] == "complete"
    c.session.stop()


def test_a_server_request_for_an_undeclared_capability_is_refused_and_the_call_goes_on(runtime):
    c = _Client(runtime, "caps")
    stream = c.send(_request(1, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 3}}))
    replies: list = []
    # origin_request names the Session's token for the call: its forwarded calls are counted from 1
    c.session.tell(ServerRequest("echo", 9, "elicitation/create", {"message": "?"}, replies.append, origin_request=1))
    wait_until(lambda: replies, 5, message="the server's request refused")
    assert isinstance(replies[0], UpstreamError) and replies[0].code == -32021
    assert replies[0].data == {"requiredCapabilities": {"elicitation": {}}}
    # the call goes on: troupe cannot know it triggered the request (servers also ask on their own)
    wait_until(lambda: stream, 10, message="the call answered")
    assert stream[0]["result"]["content"][0]["text"] == "slept"
    # declared in the request's own envelope: a modern client takes no server requests, so the
    # call is parked and its client hears input_required, with troupe's sealed state
    declared = c.send(_request(2, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 3}},
                               **{modern.META_CAPABILITIES: {"elicitation": {}}}))
    c.session.tell(ServerRequest("echo", 10, "elicitation/create", {"message": "?"}, replies.append, origin_request=2))
    wait_until(lambda: declared, 5, message="the call answered input_required")
    result = declared[0]["result"]
    assert result["resultType"] == "input_required" and result["requestState"].startswith("troupe1.")
    assert result["inputRequests"] == {"echo-1": {"method": "elicitation/create", "params": {"message": "[echo] ?"}}}
    assert len(replies) == 1  # the server's request waits for the client's retry
    c.session.stop()
    wait_until(lambda: len(replies) == 2, 5, message="the parked request answered when the session went")
    assert isinstance(replies[1], UpstreamError)


def test_logs_go_only_with_the_request_that_asked_for_them(runtime):
    c = _Client(runtime, "logs")
    asked = c.send(_request(1, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 2}},
                            **{modern.META_LOG_LEVEL: "warning"}))
    quiet = c.send(_request(2, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 2}}))
    c.session.tell(ServerLogged("echo", "info", None, "too low"))
    c.session.tell(ServerLogged("echo", "error", "db", "disk full"))
    c.session.tell(ServerLogged("other", "error", None, "not this server"))
    wait_until(lambda: any("id" in m for m in asked) and any("id" in m for m in quiet), 10, message="both answered")
    logs = [m for m in asked if m.get("method") == "notifications/message"]
    assert [m["params"] for m in logs] == [{"level": "error", "logger": "echo/db", "data": "disk full"}]
    assert not any(m.get("method") for m in quiet) and c.told == []
    c.session.stop()
