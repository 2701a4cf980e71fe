"""A server's lists read page by page: a read that fails keeps the last good list (a passing error
must not empty a working server's tools) and asks a modern upstream to be read again soon."""
from __future__ import annotations

from actors.messages import UpstreamError
from actors.upstream.listing import FAILED_LIST_RETRY_MS, UpstreamLists

CAPS = {"tools": {}}


def _lists(answers: list):
    completed: list[dict] = []

    def request(method, params, on_reply):
        on_reply(answers.pop(0))
    return UpstreamLists(request, completed.append), completed


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
