"""The CacheKeeper and the Session's side of a cached call, in-process: a keeper that is stopped or
never answers costs the call its cache, never its answer (the Session's own lookup deadline), and
an answer begun before an invalidation is not stored."""
from __future__ import annotations

import time

import pykka
import pytest

from actors.caching import keys
from actors.caching.keeper import CacheKeeper
from actors.caching.messages import GetCacheStats, Invalidate, LookUp, Store
from actors.caching.session_side import LOOKUP_DEADLINE
from actors.downstream.session import Session
from actors.messages import ClientMessage
from actors.runtime import Runtime
from actors.settings import config
from tests.support import PYTHON, ROOT, wait_until


@pytest.fixture
def runtime():
    cfg = config.from_data({"servers": [{"name": "c", "pin": False, "cache": {"ttl": 60}, "transport": {
        "type": "stdio", "stdio": {"command": PYTHON, "args": ["-m", "tests.servers.cached"], "work_dir": str(ROOT)}}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}})
    rt = Runtime(cfg).start()
    wait_until(lambda: rt.connection("c") is not None, 15, message="c ready")
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


def call(session, answers: list, rid: int, key: str = "k") -> dict:
    session.tell(ClientMessage({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                "params": {"name": "c__lookup", "arguments": {"key": key}}}, answers.append))
    return wait_until(lambda: next((a for a in answers if a.get("id") == rid), None), 10, message=f"answer {rid}")


def cached(answer: dict) -> bool:
    return "troupe/cache" in (answer["result"].get("_meta") or {})


def test_hit_then_a_stopped_keeper_still_answers(runtime):
    session, answers = Session.start(runtime, key="t1", mode="flat"), []
    first = call(session, answers, 1)
    assert not cached(first) and cached(call(session, answers, 2))
    assert runtime.cache is not None
    runtime.cache.stop()
    third = call(session, answers, 3)  # the tell fails: forwarded at once
    assert not cached(third) and third["result"]["content"][0]["text"] != first["result"]["content"][0]["text"]
    session.stop()


def test_a_keeper_that_never_answers_costs_only_the_lookup_deadline(runtime, monkeypatch):
    original = CacheKeeper.on_receive

    def swallow(self, message):
        if isinstance(message, LookUp):
            return None  # lost: no reply ever
        return original(self, message)
    monkeypatch.setattr(CacheKeeper, "on_receive", swallow)
    session, answers = Session.start(runtime, key="t2", mode="flat"), []
    began = time.monotonic()
    answer = call(session, answers, 1)
    assert not cached(answer) and "lookup k #1" in answer["result"]["content"][0]["text"]
    assert LOOKUP_DEADLINE * 0.9 <= time.monotonic() - began < LOOKUP_DEADLINE + 5
    assert len(answers) == 1
    session.stop()


def test_an_answer_begun_before_an_invalidation_is_not_stored():
    keeper = CacheKeeper.start(10_000)
    try:
        key = keys.tool_key("s", "t", {}, "-")
        replies: list = []
        keeper.tell(LookUp(key, replies.append))
        wait_until(lambda: replies, 5, message="the miss")
        epoch = replies[0].epoch
        keeper.tell(Invalidate("s", "ServerListChanged"))
        keeper.tell(Store(key, b'{"content":[]}', 60, epoch))  # made before the change: dropped
        keeper.tell(LookUp(key, replies.append))
        wait_until(lambda: len(replies) == 2, 5, message="the second lookup")
        assert replies[1].body is None and replies[1].epoch == epoch + 1
        keeper.tell(Store(key, b'{"content":[]}', 60, replies[1].epoch))  # made after: kept
        keeper.tell(LookUp(key, replies.append))
        wait_until(lambda: len(replies) == 3, 5, message="the third lookup")
        assert replies[2].body == b'{"content":[]}'
        future = pykka.ThreadingFuture()
        keeper.tell(GetCacheStats(future))
        stats = future.get(timeout=5)
        assert (stats["hits"], stats["misses"], stats["stores"]) == (1, 2, 1)
    finally:
        keeper.stop()
