"""The two eras' task shapes (actors/tasks/wire.py): what a server or client says is checked before
troupe keeps it, and each era gets its own shape."""
from __future__ import annotations

from actors.tasks import wire

TASK = {"taskId": "t1", "status": "working", "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:01Z", "ttlMs": 60000, "pollIntervalMs": 500}


def test_a_servers_tasks_are_told_by_its_capabilities_of_either_era():
    assert wire.server_form({"extensions": {wire.EXTENSION: {}}}) == wire.MODERN
    assert wire.server_form({"tasks": {"requests": {"tools": {"call": {}}}}}) == wire.LEGACY
    assert wire.server_form({"tasks": {"list": {}}}) == ""  # tools/call is not task-augmented there
    for wrong in (None, [], {"extensions": []}, {"extensions": {wire.EXTENSION: True}},
                  {"tasks": {"requests": {"tools": {"call": True}}}}):
        assert wire.server_form(wrong) == ""


def test_a_malformed_task_is_named_never_kept():
    assert wire.checked({**TASK, "taskId": 7}).startswith("taskId")
    assert wire.checked({**TASK, "taskId": "x" * 600}).startswith("taskId")
    assert wire.checked({**TASK, "status": "done"}).startswith("status")
    assert wire.checked({**TASK, "status": "completed", "result": "5"}) == "result must be an object"
    assert wire.checked(["t1"]) == "a task must be an object"


def test_a_checked_task_keeps_only_what_troupe_serves_each_of_its_type():
    task = wire.checked({**TASK, "ttlMs": True, "pollIntervalMs": -1, "statusMessage": "m" * 5000,
                         "createdAt": 12, "secret": "kept nowhere"})
    assert isinstance(task, dict)
    assert task["ttlMs"] is None and "pollIntervalMs" not in task and "secret" not in task
    assert len(task["statusMessage"]) == wire.MAX_STATUS_MESSAGE
    assert isinstance(task["createdAt"], str)


def test_the_2025_11_25_shapes_convert_both_ways():
    legacy = wire.to_legacy({**TASK, "result": {"content": []}})
    assert legacy == {"taskId": "t1", "status": "working", "createdAt": TASK["createdAt"],
                      "lastUpdatedAt": TASK["lastUpdatedAt"], "ttl": 60000, "pollInterval": 500}
    assert wire.checked(wire.from_legacy(legacy)) == TASK


def test_a_created_task_has_each_eras_result_shape():
    modern = wire.created({**TASK, "result": {"x": 1}}, legacy=False)
    assert modern["resultType"] == "task" and modern["taskId"] == "t1" and "result" not in modern
    assert wire.created(TASK, legacy=True) == {"task": wire.to_legacy(TASK)}
    assert wire.detailed(TASK, legacy=False)["resultType"] == "complete"


def test_a_task_result_of_a_server_is_told_from_a_plain_result():
    assert wire.task_of({"resultType": "task", **TASK}, wire.MODERN)["taskId"] == "t1"
    assert wire.task_of({"task": wire.to_legacy(TASK)}, wire.LEGACY)["ttlMs"] == 60000
    assert wire.task_of({"content": [], "task": {}}, wire.LEGACY) is None  # a tool result that says "task"
    assert wire.task_of({"task": "t1"}, wire.LEGACY) == "CreateTaskResult.task must be an object"
    assert wire.task_of({"content": []}, wire.MODERN) is None


def test_a_2025_11_25_task_augmentation_is_checked():
    assert wire.legacy_task_param({}) is None
    assert wire.legacy_task_param({"task": {}}) == {}
    assert wire.legacy_task_param({"task": {"ttl": 5}}) == {"ttl": 5}
    assert wire.legacy_task_param({"task": []}) == "task must be an object"
    assert "non-negative" in wire.legacy_task_param({"task": {"ttl": -1}})
    assert "non-negative" in wire.legacy_task_param({"task": {"ttl": True}})


def test_a_servers_related_task_key_is_taken_out_and_nothing_else():
    result = {"content": [], "_meta": {wire.RELATED_TASK: {"taskId": "up"}, "other": 1}}
    assert wire.unrelated(result) == {"content": [], "_meta": {"other": 1}}
    assert wire.unrelated({"content": [], "_meta": {wire.RELATED_TASK: {}}}) == {"content": []}
    plain = {"content": []}
    assert wire.unrelated(plain) is plain
