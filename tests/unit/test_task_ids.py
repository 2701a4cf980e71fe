"""Task ids troupe hands out (actors/tasks/ids.py): sealed, readable only by their owner (or by
anyone holding an anonymous one), never forged, never a requestState."""
from __future__ import annotations

from actors.protocol.request_state import StateSealer
from actors.tasks.ids import TaskIds

SEALER = StateSealer(lambda: b"k" * 32)


def test_an_owner_opens_its_task_and_nobody_else_does():
    ids = TaskIds(SEALER, 60)
    task_id = ids.issue("srv", "up-1", "client:alice", minted=False, form="modern")
    ref = ids.open(task_id, "client:alice")
    assert ref is not None and (ref.server, ref.upstream_id, ref.minted, ref.form) == ("srv", "up-1", False, "modern")
    assert ids.open(task_id, "client:bob") is None
    assert ids.open(task_id, "") is None  # an anonymous caller holds no named client's task


def test_an_anonymous_callers_id_is_its_own_capability():
    ids = TaskIds(SEALER, 60)
    task_id = ids.issue("srv", "local", "", minted=True)
    assert ids.open(task_id, "") is not None and ids.open(task_id, "client:bob") is not None


def test_forged_altered_expired_or_foreign_ids_open_as_nothing():
    ids = TaskIds(SEALER, 60)
    task_id = ids.issue("srv", "up", "o", minted=True)
    body, mac = task_id.rsplit(".", 1)
    assert ids.open(body + "." + mac[:-1] + ("A" if mac[-1] != "A" else "B"), "o") is None
    assert ids.open("troupe1.e30.x", "o") is None and ids.open(42, "o") is None and ids.open(None, "o") is None
    assert TaskIds(StateSealer(lambda: b"z" * 32), 60).open(task_id, "o") is None  # another troupe's key
    assert ids.open(SEALER.seal({"s": "srv", "u": "up", "o": "o"}, 60), "o") is None  # a requestState
    assert TaskIds(SEALER, -1).open(TaskIds(SEALER, -1).issue("srv", "up", "o", True), "o") is None  # expired
