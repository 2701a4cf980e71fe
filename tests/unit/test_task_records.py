"""The TaskKeeper's records (actors/tasks/records.py): live tasks counted per client, finished
results kept within their byte budget (the oldest go first) and for their TTL."""
from __future__ import annotations

import time

from actors.tasks.records import Record, Records


def _record(records: Records, n: int, cap="a", minted=True) -> Record:
    record = Record(f"l{n}", "srv", "", "o", cap, minted)
    records.add(record)
    records.issue(record, f"id{n}")
    return record


def test_live_tasks_are_counted_per_client_until_they_end():
    records = Records(60, 10_000, 3600)
    one, _two = _record(records, 1), _record(records, 2)
    _record(records, 3, cap="b")
    assert records.live == {"a": 2, "b": 1}
    one.result = {"content": []}
    one.touch("completed")
    records.finished(one)
    assert records.live == {"a": 1, "b": 1}


def test_the_oldest_finished_results_go_first_to_stay_within_the_budget():
    records = Records(60, 300, 3600)
    done = []
    for n in range(3):
        record = _record(records, n)
        record.result = {"text": "x" * 120}
        record.touch("completed")
        record.finished = time.time() + n  # in order
        records.finished(record)
        done.append(record)
    assert records.bytes <= 300 and records.dropped >= 1
    assert records.by_id("id0") is None and records.by_id("id2") is done[2]


def test_finished_tasks_expire_after_their_ttl_and_running_ones_never():
    records = Records(0.0, 10_000, 3600)
    running, finished = _record(records, 1), _record(records, 2)
    finished.touch("failed")
    records.finished(finished)
    finished.finished = time.time() - 1
    assert records.expired(time.time()) == [finished]
    assert running not in records.expired(time.time() + 10)


def test_a_relayed_task_without_a_ttl_is_forgotten_after_the_longest_a_task_runs():
    records = Records(1.0, 10_000, 5.0)
    relayed = _record(records, 1, minted=False)
    assert records.expired(time.time()) == []
    assert records.expired(relayed.created + 7.0) == [relayed]


def test_a_task_view_has_its_result_its_error_or_its_questions_by_status():
    records = Records(60, 10_000, 3600)
    record = _record(records, 1)
    record.questions["q1"] = {"method": "elicitation/create", "params": {
        "message": "?", "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "upstream"}}}}
    record.touch("input_required")
    view = record.view(60)
    assert view["inputRequests"] == {"q1": {"method": "elicitation/create", "params": {"message": "?"}}}
    record.questions.clear()
    record.error = {"code": -32000, "message": "gone"}
    record.touch("failed")
    assert record.view(60)["error"] == record.error and "inputRequests" not in record.view(60)
    assert record.view(60)["ttlMs"] >= 60_000  # a minted task's TTL runs from its end
