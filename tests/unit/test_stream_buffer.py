"""The byte-counted outbox toward one consumer: notifications dropped first, then the stream closed."""
from __future__ import annotations

import gevent

from actors.serve.stream_buffer import EMPTY, NOTICE_SHARE, StreamBuffer, StreamStats, WriterGate, droppable

LIMIT = 1000
LOG = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x"}}
PROGRESS = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}


def test_progress_and_log_notifications_are_the_droppable_kinds():
    assert droppable(LOG) == "log"
    assert droppable(PROGRESS) == "progress"
    assert droppable({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) is None
    assert droppable({"jsonrpc": "2.0", "id": 1, "result": {}}) is None
    assert droppable({"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage"}) is None
    assert droppable([LOG]) is None and droppable(b"data") is None


def test_notifications_past_their_share_are_dropped_and_counted_while_answers_still_fit():
    stats = StreamStats()
    buf = StreamBuffer(LIMIT, stats, "session")
    taken = 0
    while buf.offer(b"n" * 100, "log") and buf.dropped == 0:
        taken += 1
    assert taken == int(LIMIT * NOTICE_SHARE) // 100  # 7 fit under 750 bytes; the 8th is dropped
    assert buf.offer(b"p" * 100, "progress") and buf.dropped == 2 and buf.dropped_bytes == 200
    assert buf.queued == 700 and not buf.closed
    assert buf.offer(b"a" * 300, None)  # an answer uses the room kept for answers: 1000 in all
    assert buf.queued == LIMIT
    figures = stats.report()["session"]
    assert figures == {"dropped": {"progress": 1, "log": 1}, "dropped_bytes": 200, "closed_slow": 0,
                       "buffered_bytes": LIMIT}


def test_what_cannot_be_dropped_and_does_not_fit_closes_the_stream_once():
    stats = StreamStats()
    calls = []
    buf = StreamBuffer(LIMIT, stats, "events", on_overflow=lambda: calls.append(buf.lost))
    assert buf.offer(b"a" * 600, None) and buf.offer(b"b" * 300, None)
    assert not buf.offer(b"c" * 200, None)  # 1100 > 1000
    assert buf.closed and buf.slow and buf.queued == 0
    assert (buf.lost, buf.lost_bytes) == (3, 1100)  # the two waiting and the refused one
    assert calls == [3]
    assert not buf.offer(b"d", None) and not buf.offer(b"e", "log")  # closed: refused, no second overflow
    assert calls == [3]
    assert stats.report()["events"]["closed_slow"] == 1 and stats.report()["events"]["buffered_bytes"] == 0
    buf.put("last word")  # a final event still goes out after the close
    assert buf.get(timeout=0) == "last word"


def test_one_big_answer_into_an_empty_buffer_is_taken():
    buf = StreamBuffer(LIMIT)
    assert buf.offer(b"x" * (3 * LIMIT), None) and buf.queued == 3 * LIMIT
    assert buf.get(timeout=0) == b"x" * (3 * LIMIT) and buf.queued == 0


def test_get_gives_items_in_order_counts_them_out_and_waits_with_a_bound():
    stats = StreamStats()
    buf = StreamBuffer(LIMIT, stats, "post")
    sentinel = object()
    buf.offer(b"one", None)
    buf.put({"id": 1})  # an answer: never counted
    buf.put(sentinel)
    assert buf.queued == 3
    assert buf.get(timeout=0) == b"one" and buf.queued == 0
    assert buf.get(timeout=0) == {"id": 1}
    assert buf.get(timeout=0) is sentinel
    assert buf.get(timeout=0.01) is EMPTY
    later = gevent.spawn_later(0.01, buf.offer, b"two", None)
    assert buf.get(timeout=5) == b"two"
    later.join()
    assert stats.report()["post"]["buffered_bytes"] == 0


def test_close_releases_what_waits():
    stats = StreamStats()
    buf = StreamBuffer(LIMIT, stats, "modern")
    for _ in range(5):
        buf.offer(b"z" * 100, "progress")
    assert stats.report()["modern"]["buffered_bytes"] == 500
    buf.close()
    assert buf.queued == 0 and buf.get(timeout=0) is EMPTY and not buf.slow
    assert stats.report()["modern"]["buffered_bytes"] == 0 and stats.report()["modern"]["closed_slow"] == 0


def test_writer_gate_applies_the_same_policy_to_a_writer_that_counts_its_own_bytes():
    stats = StreamStats()
    ended = []
    gate = WriterGate(LIMIT, lambda: ended.append(True), stats)
    assert gate.admit(0, 5000, None)  # the writer is empty: one big answer goes
    assert gate.admit(700, 50, "log") and not gate.admit(720, 50, "log")
    assert gate.admit(720, 280, None)  # answers may fill the whole limit
    assert not ended
    assert not gate.admit(900, 200, None) and ended == [True] and gate.overflowed
    assert not gate.admit(0, 1, None) and ended == [True]  # ended once; nothing more is written
    figures = stats.report()["stdio"]
    assert figures["dropped"] == {"progress": 0, "log": 1} and figures["dropped_bytes"] == 50
    assert figures["closed_slow"] == 1
