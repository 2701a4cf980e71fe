"""The approvals file's decisions: what an approval pins."""
from actors.trust import ledger


def test_approving_a_server_that_never_listed_anything_pins_nothing():
    data: dict = {"servers": {}}
    entry = ledger.decide(data, "id-1", "proj", ledger.APPROVED, "project", "sh -c true")
    assert entry["decision"] == ledger.APPROVED
    assert "pinned" not in entry  # its first listing is pinned then, not withheld as all-new
    assert ledger.snapshot(data, 1).pins == {}


def test_approving_accepts_what_was_withheld():
    entry = {"withheld": {"tools": {"weather": {"digest": "d2", "kind": "changed", "definition": {"x": 1}}}},
             "pinned": {"tools": {"weather": {"digest": "d1"}}, "prompts": {}}}
    assert ledger.accept_withheld(entry) == 1
    assert entry["pinned"]["tools"]["weather"]["digest"] == "d2" and "withheld" not in entry
