"""ServerState: one list of server states, written and compared exactly as the plain strings were."""
from __future__ import annotations

import json
import re

import orjson

from actors.supervision.states import CALLABLE_STATES, ServerState
from actors.trust import provenance
from tests.support import ROOT


def test_a_state_is_its_string_in_json_comparisons_and_text():
    assert ServerState.READY == "ready" and "ready" == ServerState.READY
    assert ServerState("pending-approval") is ServerState.PENDING_APPROVAL
    assert {"ready": 1}[ServerState.READY] == 1
    assert orjson.dumps({"state": ServerState.FAILED}) == b'{"state":"failed"}'
    assert json.dumps({"state": ServerState.FAILED}) == '{"state": "failed"}'
    assert f"{ServerState.BACKOFF} → {ServerState.READY:>7}" == "backoff →   ready"
    assert str(ServerState.DENIED) == "{}".format(ServerState.DENIED) == "denied"


def test_the_trust_gate_states_are_the_trust_verdicts():
    # The supervisor sets a gated server's state to the verdict that holds it back.
    assert ServerState.PENDING_APPROVAL == provenance.PENDING
    assert ServerState.DENIED == provenance.DENIED
    assert set(CALLABLE_STATES) == {"ready", "degraded"}


def test_the_dashboard_knows_the_states_by_the_same_strings():
    app = (ROOT / "actors" / "dashboard" / "app.js").read_text(encoding="utf-8")
    named = set(re.findall(r'"(starting|ready|degraded|backoff|failed|stopped|pending-approval|denied)"', app))
    assert named and named <= {s.value for s in ServerState}
    assert {ServerState.PENDING_APPROVAL, ServerState.DENIED} <= named
