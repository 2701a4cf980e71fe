"""A server's lists read page by page: a read that fails keeps the last good list (a passing error
must not empty a working server's tools) and asks a modern upstream to be read again soon."""
from __future__ import annotations

from typing import Any, Callable

from actors.messages import UpstreamError
from actors.upstream.listing import FAILED_LIST_RETRY_MS, UpstreamLists
from actors.upstream.stats import ServerStats

CAPS = {"tools": {}}


def _lists(answers: list):
    completed: list[dict] = []

    def request(method, params, on_reply):
        on_reply(answers.pop(0))
    return UpstreamLists(request, lambda lists, done, changed: completed.append(lists)), completed


def test_a_failed_reread_keeps_the_last_good_list_and_asks_for_a_retry():
    lists, completed = _lists([{"tools": [{"name": "a"}], "ttlMs": 60_000},
                               UpstreamError(-32001, "the owner is moving")])
    lists.read(["tools"], CAPS)
    assert completed[-1]["tools"] == ({"name": "a"},) and lists.ttls["tools"] == 60_000
    lists.read(["tools"], CAPS)
    assert completed[-1]["tools"] == ({"name": "a"},)  # not emptied
    assert lists.ttls["tools"] == FAILED_LIST_RETRY_MS


def test_a_first_read_that_fails_is_empty_and_retried():
    lists, completed = _lists([UpstreamError(-32000, "unavailable")])
    lists.read(["tools"], CAPS)
    assert completed[-1]["tools"] == () and lists.ttls["tools"] == FAILED_LIST_RETRY_MS


# ------------------------------------------------------------------ coalesced re-reads

class _Upstream:
    """Requests kept unanswered until the test answers them, oldest first."""

    def __init__(self) -> None:
        self.open: list[tuple[str, Any, Callable[[Any], None]]] = []
        self.read: list[tuple[dict, tuple, bool]] = []
        self.stats = ServerStats()
        self.lists = UpstreamLists(self.request, lambda lists, done, changed: self.read.append((lists, done, changed)),
                                   stats=self.stats)

    def request(self, method, params, on_reply):
        self.open.append((method, params, on_reply))

    def answer(self, result) -> tuple[str, object]:
        method, params, on_reply = self.open.pop(0)
        on_reply(result)
        return method, params


def _tools(version: int, count: int = 3) -> dict:
    return {"tools": [{"name": f"t{i}", "description": f"v{version}"} for i in range(count)]}


def test_list_changed_while_a_read_is_in_flight_makes_one_pending_read_however_many():
    up = _Upstream()
    up.lists.changed(["tools"])  # before the first read: nothing to re-read yet
    assert up.open == []
    up.lists.read(["tools"], CAPS)
    up.answer(_tools(1))
    assert up.read[-1][0]["tools"][0]["description"] == "v1" and up.stats.relists == 0
    up.lists.changed(["tools"])
    assert len(up.open) == 1 and up.lists.reading == {"tools"} and not up.lists.pending
    for _ in range(1000):  # a storm while the re-read is in flight
        up.lists.changed(["tools"])
    assert len(up.open) == 1 and up.lists.pending == {"tools"}
    up.answer(_tools(2))  # the one in flight answers: its list is handed on, the pending one goes
    assert up.read[-1][0]["tools"][0]["description"] == "v2" and up.read[-1][1:] == (("tools",), True)
    assert len(up.open) == 1 and up.lists.reading == {"tools"} and not up.lists.pending
    up.answer(_tools(3))  # no update lost: the last read started after the last notification
    assert up.read[-1][0]["tools"][0]["description"] == "v3"
    assert up.open == [] and not up.lists.reading and up.stats.relists == 2


def test_an_unchanged_reread_is_handed_on_as_unchanged():
    up = _Upstream()
    up.lists.read(["tools"], CAPS)
    up.answer(_tools(1))
    assert up.read[-1][2] is True  # the first listing
    up.lists.changed(["tools"])
    up.answer(_tools(1))
    assert up.read[-1][2] is False
    up.lists.changed(["tools"])
    up.answer(_tools(1, count=4))
    assert up.read[-1][2] is True


def test_a_paginated_reread_counts_once_and_a_change_during_it_waits_for_its_last_page():
    up = _Upstream()
    up.lists.read(["tools"], CAPS)
    up.answer(_tools(1))
    up.lists.changed(["tools"])
    assert up.answer({"tools": [{"name": "a"}], "nextCursor": "2"}) == ("tools/list", None)
    up.lists.changed(["tools"])  # between two pages of the same read
    assert up.lists.pending == {"tools"}
    assert up.answer({"tools": [{"name": "b"}]}) == ("tools/list", {"cursor": "2"})
    assert [t["name"] for t in up.read[-1][0]["tools"]] == ["a", "b"]
    assert up.answer({"tools": [{"name": "c"}]}) == ("tools/list", None)  # the pending read, from the start
    assert [t["name"] for t in up.read[-1][0]["tools"]] == ["c"] and up.stats.relists == 2


def test_the_first_listing_waits_for_every_kind_and_a_change_during_it_is_not_lost():
    up = _Upstream()
    up.lists.read(["tools", "prompts", "resources"], {"tools": {}, "prompts": {}})
    assert [m for m, _, _ in up.open] == ["tools/list", "prompts/list"]
    up.lists.changed(["tools"])
    up.answer(_tools(1))  # tools done, prompts still read: nothing handed on; the pending tools go
    assert up.read == [] and [m for m, _, _ in up.open] == ["prompts/list", "tools/list"]
    up.answer({"prompts": [{"name": "p"}]})
    assert len(up.read) == 0  # the re-read of tools is in flight: the first listing waits for it
    up.answer(_tools(2))
    lists, done, changed = up.read[-1]
    assert lists["tools"][0]["description"] == "v2" and lists["prompts"] == ({"name": "p"},)
    assert lists["resources"] == () and set(done) == {"tools", "prompts", "resources"} and changed


def test_storms_on_two_kinds_still_hand_on_each_read():
    up = _Upstream()
    caps = {"tools": {}, "prompts": {}}
    up.lists.read(["tools", "prompts"], caps)
    up.answer(_tools(0))
    up.answer({"prompts": []})
    handed = len(up.read)
    for version in range(1, 6):  # both kinds always have a read in flight and one pending
        up.lists.changed(["tools", "prompts"])
        up.lists.changed(["tools", "prompts"])
        up.answer(_tools(version))
        up.answer({"prompts": [{"name": f"p{version}"}]})
    assert len(up.read) - handed == 10 and len(up.open) == 2  # one hand-on per ended read
    assert up.read[-1][0]["tools"][0]["description"] == "v5"


def test_a_storm_is_announced_once_per_reread_and_never_before_a_notification_it_stands_for():
    up = _Upstream()
    stale: list[tuple] = []
    up.lists = UpstreamLists(up.request, lambda lists, done, changed: up.read.append((lists, done, changed)),
                             on_stale=stale.append, stats=up.stats)
    up.lists.read(["tools"], CAPS)
    up.answer(_tools(1))
    up.lists.changed(["tools"])  # starts a re-read: announced now
    up.lists.changed(["tools"])  # makes it pending: announced now (the cache drops at once)
    assert stale == [("tools",), ("tools",)]
    for _ in range(100):  # while pending: heard, and announced when the pending read is sent
        up.lists.changed(["tools"])
    assert len(stale) == 2
    up.answer(_tools(2))
    assert stale == [("tools",)] * 3 and len(up.open) == 1
    up.answer(_tools(3))
    assert len(stale) == 3 and up.open == []
    up.lists.due(["tools"])  # a ttl re-read announces nothing
    up.answer(_tools(3))
    assert len(stale) == 3 and up.read[-1][2] is False
