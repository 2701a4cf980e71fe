"""ModernUpstream: one listen stream with the right filter, reopened on change or end, and
re-lists by ttlMs for lists the server cannot announce; valid_tools drops bad x-mcp-header tools."""
from __future__ import annotations

import gevent
import pytest

from actors.messages import UpstreamError
from actors.upstream import modern
from actors.upstream.modern import ListenDue, ModernUpstream, RelistDue, valid_tools

def wait_until(condition, timeout: float, message: str) -> None:
    """Poll with gevent.sleep: the timers here are greenlets, and this suite runs unpatched."""
    with gevent.Timeout(timeout, AssertionError(f"timed out after {timeout}s waiting for {message}")):
        while not condition():
            gevent.sleep(0.005)

CAPS = {"tools": {"listChanged": True}, "resources": {"subscribe": True}, "prompts": {}}


class Fake:
    """Records the requests and cancels a ModernUpstream makes; answers none until told."""

    def __init__(self):
        self.sent: list[tuple] = []
        self.cancelled: list = []
        self.told: list = []

    def request(self, method, params, on_reply, timeout):
        self.sent.append((method, params, on_reply, timeout))
        return len(self.sent)

    def upstream(self) -> ModernUpstream:
        return ModernUpstream(self.request, self.cancelled.append, self.told.append)


def test_listen_asks_for_declared_list_changes_and_subscribed_uris():
    fake = Fake()
    up = fake.upstream()
    up.listen(CAPS, ["b://2", "a://1"])
    method, params, _, timeout = fake.sent[0]
    assert method == "subscriptions/listen" and timeout == modern.LISTEN_TIMEOUT
    assert params == {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://1", "b://2"]}}
    up.listen(CAPS, ["a://1", "b://2"])  # same filter: the open stream stays
    assert len(fake.sent) == 1 and not fake.cancelled
    up.listen(CAPS, ["a://1"])  # a URI left: the stream is replaced
    assert fake.cancelled == [1] and fake.sent[1][1]["notifications"]["resourceSubscriptions"] == ["a://1"]


def test_no_listen_when_there_is_nothing_to_hear():
    fake = Fake()
    up = fake.upstream()
    up.listen({"tools": {}, "resources": {}}, ["a://1"])  # no listChanged, no subscribe capability
    assert fake.sent == []


def test_a_stream_that_ends_is_reopened_after_a_backoff(monkeypatch):
    monkeypatch.setattr(modern, "LISTEN_RETRY", (0.01, 0.05))
    fake = Fake()
    up = fake.upstream()
    up.listen(CAPS, [])
    fake.sent[0][2](UpstreamError(-32000, "stream ended", server="s"))
    wait_until(lambda: fake.told, 2, message="ListenDue told")
    due = fake.told[0]
    assert isinstance(due, ListenDue) and up.listen_due(due.epoch)
    up.listen(CAPS, [])
    assert len(fake.sent) == 2
    fake.sent[0][2](UpstreamError(-32000, "late news of the old stream", server="s"))  # ignored
    gevent.sleep(0.05)
    assert len(fake.told) == 1
    up.close()
    assert fake.cancelled == [2] and not up.listen_due(due.epoch)


def test_relist_only_kinds_without_list_changed(monkeypatch):
    monkeypatch.setattr(modern, "MIN_RELIST", 0.01)
    fake = Fake()
    up = fake.upstream()
    up.relist_after(["tools", "resources", "templates", "prompts"],
                    {"tools": 10, "resources": 10, "templates": None, "prompts": 0}, CAPS)
    wait_until(lambda: sum(len(m.kinds) for m in fake.told) == 2, 2, message="relists")
    kinds = sorted(k for msg in fake.told for k in msg.kinds)  # due together: one message
    assert all(isinstance(m, RelistDue) for m in fake.told) and kinds == ["prompts", "resources"]
    # republishing before the re-read schedules nothing more: one timer per kind
    up.relist_after(["resources"], {"resources": 10}, CAPS)
    assert len(up._relist_pending) == 2 and len([t for t in up._timers if not t.dead]) == 0
    assert up.relist_due(("resources",)) == ("resources",)
    up.relist_after(["resources"], {"resources": 10}, CAPS)
    wait_until(lambda: len(fake.told) == 2, 2, message="re-list scheduled again")
    up.close()


@pytest.mark.parametrize("ttl", [-1, True, "5", None])
def test_no_relist_without_a_usable_ttl(ttl):
    fake = Fake()
    up = fake.upstream()
    up.relist_after(["prompts"], {"prompts": ttl}, {})
    assert up._timers == []


def test_valid_tools_drops_invalid_header_annotations():
    good = {"name": "g", "inputSchema": {"type": "object", "properties": {
        "r": {"type": "string", "x-mcp-header": "Region"}}}}
    bad = {"name": "b", "inputSchema": {"type": "object", "properties": {
        "n": {"type": "number", "x-mcp-header": "N"}}}}
    plain = {"name": "p", "inputSchema": {"type": "object"}}
    kept, maps = valid_tools([good, bad, plain])
    assert [t["name"] for t in kept] == ["g", "p"] and maps == {"g": ((("r",), "Region"),)}
