"""The task figures operators read: Records.stats by kind and state, the `tasks:` line of
`troupe status`, and the Prometheus families built from the status report's tasks section."""
from __future__ import annotations

from actors.commands import task_line
from actors.tasks import metrics
from actors.tasks.records import Record, Records


def _record(records: Records, minted: bool, status: str) -> Record:
    record = Record(f"local-{len(list(records.all()))}", "echo", "" if minted else "modern", "", "anon", minted)
    records.add(record)
    records.issue(record, "id-" + record.local)
    if status != "working":
        record.touch(status)
        records.finished(record)
    return record


def test_stats_count_held_tasks_by_kind_and_state_and_refusals():
    records = Records(keep_s=60, max_bytes=1 << 20, max_age_s=3600)
    _record(records, True, "working")
    _record(records, True, "completed")
    _record(records, False, "working")
    _record(records, False, "cancelled")
    _record(records, False, "cancelled")
    records.refused_at_cap += 2
    stats = records.stats()
    assert stats["by_state"] == {"working": 2, "input_required": 0, "completed": 1, "failed": 0, "cancelled": 2}
    assert stats["by_kind_state"]["minted"] == {"working": 1, "input_required": 0, "completed": 1, "failed": 0,
                                                "cancelled": 0}
    assert stats["by_kind_state"]["relayed"]["cancelled"] == 2
    assert stats["held"] == {"minted": 2, "relayed": 3}
    assert stats["created"] == {"minted": 2, "relayed": 3}
    assert stats["refused_at_cap"] == 2
    assert records.live == {"anon": 2}  # the finished ones no longer count against the cap


def test_task_line_only_once_something_happened():
    idle = Records(60, 1 << 20, 3600).stats() | {"max_per_client": 100}
    assert task_line(idle) == ""
    assert task_line({}) == "" and task_line(None) == ""
    assert task_line({"error": "the task keeper did not answer: Timeout"}) == \
        "tasks: the task keeper did not answer: Timeout"
    busy = {**idle, "by_state": {"working": 2, "input_required": 1, "completed": 5, "failed": 0, "cancelled": 0},
            "held": {"minted": 3, "relayed": 5}, "created": {"minted": 3, "relayed": 5}}
    assert task_line(busy) == ("tasks: 2 working, 1 input_required, 5 completed, 0 failed, 0 cancelled "
                               "(3 minted, 5 relayed; cap 100 per client)")
    assert task_line({**idle, "refused_at_cap": 4}).endswith("(0 minted, 0 relayed; cap 100 per client; "
                                                            "4 refused at the cap)")


def test_metric_families_from_the_tasks_section():
    assert list(metrics.families(None)) == [] and list(metrics.families({"error": "x"})) == []
    records = Records(60, 1 << 20, 3600)
    _record(records, False, "working")
    records.refused_at_cap = 3
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in metrics.families(records.stats() | {"max_per_client": 7}) for s in family.samples}
    assert samples[("troupe_tasks", (("kind", "relayed"), ("state", "working")))] == 1
    assert samples[("troupe_tasks", (("kind", "minted"), ("state", "working")))] == 0
    assert samples[("troupe_tasks_created_total", (("kind", "relayed"),))] == 1
    assert samples[("troupe_tasks_refused_total", (("reason", "max_per_client"),))] == 3
    assert samples[("troupe_task_result_bytes", ())] == 0
    assert samples[("troupe_tasks_max_per_client", ())] == 7
