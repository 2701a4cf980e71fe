"""The parts of modern serving that need no actor: content-digest cursors, the request envelope,
the -32021 error, the listen filter, the Listens table, and the catalogue's deterministic order."""
from __future__ import annotations

import pytest

from actors.catalogue.snapshot import ServerLists, build
from actors.downstream.listens import Listens, ListenSubscribed
from actors.downstream.replies import PAGE_SIZE, BadCursor, content_digest, page
from actors.protocol import jsonrpc, mcp, modern

SUB = modern.META_SUBSCRIPTION


def _items(n: int, tag: str = "") -> list:
    return [{"name": f"t{i:04d}{tag}"} for i in range(n)]


def test_a_cursor_is_a_digest_of_the_content_so_another_instance_continues_the_page():
    items = _items(PAGE_SIZE + 7)
    first = page(items, {}, "tools", content_digest(items))
    # "another instance": a separate copy of the same content, digested afresh
    again = [dict(i) for i in items]
    rest = page(again, {"cursor": first["nextCursor"]}, "tools", content_digest(again))
    assert [t["name"] for t in first["tools"] + rest["tools"]] == [t["name"] for t in items]
    assert "nextCursor" not in rest
    assert content_digest([{"a": 1, "b": 2}]) == content_digest([{"b": 2, "a": 1}])  # key order is not content


def test_a_cursor_from_changed_content_or_not_troupes_is_refused():
    items = _items(PAGE_SIZE + 1)
    cursor = page(items, {}, "tools", content_digest(items))["nextCursor"]
    changed = _items(PAGE_SIZE + 1, tag="x")
    with pytest.raises(BadCursor, match="stale"):
        page(changed, {"cursor": cursor}, "tools", content_digest(changed))
    for bad in ("not-a-cursor", "", 12):
        with pytest.raises(BadCursor):
            page(items, {"cursor": bad}, "tools", content_digest(items))


def test_the_envelope_decides_which_logs_go_with_its_request():
    env = modern.Envelope({modern.META_CAPABILITIES: {"elicitation": {}}, modern.META_LOG_LEVEL: "warning"})
    assert env.capabilities == {"elicitation": {}}
    assert env.logs("error") and env.logs("warning") and not env.logs("info")
    assert not modern.Envelope({modern.META_CAPABILITIES: {}}).logs("emergency")  # no level asked: no logs
    sink = modern.finishing_sink(1, "tools/call", print, env)
    assert modern.envelope_of(sink) is env and modern.envelope_of(print) is None


def test_the_listen_filter_is_checked():
    assert modern.listen_filter({"notifications": {"toolsListChanged": True}}) == {"toolsListChanged": True}
    assert isinstance(modern.listen_filter({}), str)
    assert isinstance(modern.listen_filter({"notifications": {"toolsListChanged": "yes"}}), str)
    assert isinstance(modern.listen_filter({"notifications": {"resourceSubscriptions": "a://b"}}), str)
    assert isinstance(modern.listen_filter({"notifications": {"resourceSubscriptions": [1]}}), str)


def test_discover_says_what_troupe_backs_for_modern_clients():
    caps = modern.discover_result("x")["capabilities"]
    assert caps["tools"]["listChanged"] and caps["resources"]["subscribe"] and "logging" in caps


class _Upstream:
    """Records the unsubscribes the Listens owe, per stream."""

    def __init__(self) -> None:
        self.gone: list = []

    def unsubscriber(self, rid):
        return lambda server, uri: self.gone.append((rid, server, uri))


def _catalogue(version: int, *tools: str, prompts: tuple = (), resources: tuple = ()):
    return build({"s": ServerLists("s", "s", tools=tuple({"name": t} for t in tools), prompts=prompts,
                                   resources=resources)}, "__", version)


def test_a_listen_is_acknowledged_first_and_each_notice_carries_its_id():
    up, out = _Upstream(), []
    listens = Listens(up.unsubscriber)
    listens.open("L1", out.append, {"toolsListChanged": True, "promptsListChanged": False,
                                    "resourceSubscriptions": ["a://x", "a://nowhere"]}, ["a://x"], _catalogue(1, "a"))
    ack = out[0]
    assert ack["method"] == modern.ACKNOWLEDGED and ack["params"]["_meta"] == {SUB: "L1"}
    assert ack["params"]["notifications"] == {"toolsListChanged": True, "resourceSubscriptions": ["a://x"]}
    listens.subscribed(ListenSubscribed("L1", "srv", "x-upstream", "a://x", True))
    listens.list_changed(["tools", "prompts", "resources"], _catalogue(2, "a", "b", prompts=({"name": "p"},)))
    listens.updated("srv", "x-upstream")
    listens.updated("srv", "other")
    assert [m["method"] for m in out[1:]] == ["notifications/tools/list_changed", "notifications/resources/updated"]
    assert out[2]["params"] == {"uri": "a://x", "_meta": {SUB: "L1"}}
    assert all(m["params"]["_meta"][SUB] == "L1" for m in out)


def test_a_listen_hears_only_of_lists_that_differ_from_what_its_client_has():
    up, out = _Upstream(), []
    listens = Listens(up.unsubscriber)
    listens.open("L", out.append, {"toolsListChanged": True, "resourcesListChanged": True}, [], _catalogue(1, "a"))
    listens.list_changed(["tools", "resources"], _catalogue(2, "a"))  # rebuilt, the same lists: no news
    assert [m["method"] for m in out] == [modern.ACKNOWLEDGED]
    listens.list_changed(["tools"], _catalogue(3, "a", "b"))
    listens.list_changed(["tools"], _catalogue(4, "a", "b"))  # the same change again: told once
    listens.list_changed(["tools"], _catalogue(5, "a"))  # and back: its client fetched "a", "b" since
    listens.list_changed(["templates"], _catalogue(6, "a", resources=({"uri": "r://1", "name": "r"},)))
    assert [m["method"] for m in out[1:]] == ["notifications/tools/list_changed"] * 2 + [
        "notifications/resources/list_changed"]


def test_a_listen_ends_once_answered_and_its_subscriptions_are_released():
    up, out = _Upstream(), []
    listens = Listens(up.unsubscriber)
    listens.open(7, out.append, {"resourceSubscriptions": ["a://x"]}, ["a://x"], _catalogue(1))
    listens.subscribed(ListenSubscribed(7, "srv", "x", "a://x", True))
    listens.subscribed(ListenSubscribed(7, "srv", "refused", "a://r", False))
    assert listens.end(7) and not listens.end(7)
    answer = out[-1]
    assert answer["id"] == 7 and answer["result"]["resultType"] == "complete"
    assert answer["result"]["_meta"][SUB] == 7 and answer["result"]["_meta"][modern.META_SERVER_INFO] == mcp.SERVER_INFO
    assert up.gone == [(7, "srv", "x")]
    # a subscription confirmed after its stream ended is released at once
    listens.subscribed(ListenSubscribed(7, "srv", "late", "a://late", True))
    assert up.gone[-1] == (7, "srv", "late")
    listens.open(8, out.append, {"toolsListChanged": True}, [], _catalogue(1))
    listens.open(9, out.append, {}, [], _catalogue(1))
    listens.close()
    assert len(listens) == 0 and [m["id"] for m in out if "id" in m] == [7, 8, 9]
    assert all(jsonrpc.is_response(m) for m in out if "id" in m)


def test_tools_are_in_name_order_within_each_server_whatever_order_it_listed():
    a = ServerLists("a", "a", tools=({"name": "zeta"}, {"name": "alpha"}, {"name": "mid"}))
    b = ServerLists("b", "b", tools=({"name": "beta"}, {"name": "aardvark"}))
    shuffled = ServerLists("a", "a", tools=({"name": "mid"}, {"name": "zeta"}, {"name": "alpha"}))
    names = [t.name for t in build({"b": b, "a": a}, "__", 1).tools]
    assert names == ["a__alpha", "a__mid", "a__zeta", "b__aardvark", "b__beta"]
    assert [t.name for t in build({"a": shuffled, "b": b}, "__", 2).tools] == names
