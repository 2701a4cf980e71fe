"""Session quotas per client (issue 26, item 4) against a real troupe over HTTP: one client's flood
of 2,000 initializes never closes another client's idle session, whether the flooder hits its
own quota (profiles.<name>.max_sessions) or troupe's (serve.max_sessions); a client at its quota
with every session busy gets a 429 that says so, while other clients still get sessions; and
/status `clients` counts sessions and evictions by client."""
from __future__ import annotations

import threading

import pytest
import requests
import yaml

from tests.e2e.test_http_limits import INIT, JSON, PROTOCOL
from tests.support import wait_until
from tests.support.troupe import TroupeHttp, server, write_config

FLOOD = 2000
CEILING = 12  # serve.max_sessions
SMALL = 5  # the flooder's quota (profiles.small.max_sessions)
TOKENS = {"bob": "bob-token-6c1d0e", "flood": "flood-token-93ab27", "operator": "operator-token-e4f580"}


@pytest.fixture
def troupe(tmp_path):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat", json_response=True,
                          max_sessions=CEILING, auth_token=TOKENS["operator"],
                          clients=[{"name": "bob", "token": TOKENS["bob"]},
                                   {"name": "flood", "token": TOKENS["flood"], "profile": "small"}])
    data = yaml.safe_load(config.read_text())
    data["profiles"] = {"small": {"max_sessions": SMALL}}
    config.write_text(yaml.safe_dump(data))
    t = TroupeHttp(config)
    try:
        wait_until(lambda: all(s["state"] == "ready" for s in _status(t)["servers"]), 30, message="echo ready")
        yield t
    finally:
        assert t.stop() == 0


def _auth(name: str) -> dict:
    return {**JSON, "Authorization": f"Bearer {TOKENS[name]}"}


def _h(name: str, sid: str) -> dict:
    return {**_auth(name), "Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL}


def _status(t) -> dict:
    return requests.get(t.base + "/status", headers=_auth("operator"), timeout=10).json()


def _initialize(t, name: str, http=requests) -> str:
    resp = http.post(t.url, json=INIT, headers=_auth(name), timeout=10)
    assert resp.status_code == 200 and "result" in resp.json(), resp.text
    sid = resp.headers["Mcp-Session-Id"]
    note = http.post(t.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                     headers=_h(name, sid), timeout=10)
    assert note.status_code == 202, note.text
    return sid


def _echo(t, name: str, sid: str) -> str:
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo__echo",
                                                                           "arguments": {"text": "still here"}}}
    resp = requests.post(t.url, json=call, headers=_h(name, sid), timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()["result"]["content"][0]["text"]


def _flood(t, name: str) -> list[str]:
    """FLOOD initializes over one keep-alive connection (sessions, not sockets); their ids."""
    sids = []
    with requests.Session() as http:
        for _ in range(FLOOD):
            resp = http.post(t.url, json=INIT, headers=_auth(name), timeout=10)
            assert resp.status_code == 200, resp.text
            sids.append(resp.headers["Mcp-Session-Id"])
    return sids


def test_a_flood_at_its_own_quota_evicts_only_its_own_sessions_then_is_refused_when_all_are_busy(troupe):
    t = troupe
    bobs = [_initialize(t, "bob") for _ in range(2)]  # idle from here on
    flooded = _flood(t, "flood")
    assert [_echo(t, "bob", sid) for sid in bobs] == ["still here"] * 2
    clients = _status(t)["clients"]
    assert clients["bob"]["sessions"] == 2 and clients["bob"]["sessions_evicted"] == 0, clients
    assert clients["flood"]["sessions"] == SMALL and clients["flood"]["profile"] == "small", clients
    assert clients["flood"]["sessions_evicted"] == FLOOD - SMALL, clients
    assert _status(t)["sessions"]["open"] == 2 + SMALL

    # The flooder's surviving sessions (its last ones), each busy with a long call.
    survivors = flooded[-SMALL:]
    answers: dict[str, int] = {}

    def slow_call(sid: str) -> None:
        call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": {"name": "echo__sleep", "arguments": {"seconds": 60}}}
        answers[sid] = requests.post(t.url, json=call, headers=_h("flood", sid), timeout=30).status_code
    callers = [threading.Thread(target=slow_call, args=(sid,)) for sid in survivors]
    for caller in callers:
        caller.start()
    try:
        wait_until(lambda: _status(t)["sessions"]["busy"] == SMALL, 20, message="the flooder's sessions busy")
        refused = requests.post(t.url, json=INIT, headers=_auth("flood"), timeout=10)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0, refused.text
        error = refused.json()["error"]
        assert error["code"] == -32000 and "session quota full" in error["message"], error
        assert "'flood'" in error["message"] and "profiles.small.max_sessions" in error["message"], error
        assert TOKENS["flood"] not in refused.text
        assert _echo(t, "bob", _initialize(t, "bob")) == "still here"  # others still get sessions
        clients = _status(t)["clients"]
        assert clients["flood"]["sessions_refused"] == 1 and clients["bob"]["sessions"] == 3, clients
    finally:
        for sid in survivors:
            requests.delete(t.url, headers=_h("flood", sid), timeout=10)
        for caller in callers:
            caller.join(timeout=20)
    assert not any(caller.is_alive() for caller in callers)
    assert [_echo(t, "bob", sid) for sid in bobs] == ["still here"] * 2


def test_a_flood_at_troupes_ceiling_evicts_only_the_flooders_sessions(troupe):
    t = troupe
    bobs = [_initialize(t, "bob") for _ in range(3)]  # within its fair share of the ceiling
    _flood(t, "operator")  # the operator's token: the unnamed bucket, quota 100 > the ceiling
    assert [_echo(t, "bob", sid) for sid in bobs] == ["still here"] * 3
    figures = _status(t)
    clients, sessions = figures["clients"], figures["sessions"]
    assert clients["bob"]["sessions"] == 3 and clients["bob"]["sessions_evicted"] == 0, clients
    assert clients["-"]["sessions"] == CEILING - 3, clients
    assert clients["-"]["sessions_evicted"] == FLOOD - (CEILING - 3), clients
    assert sessions["open"] == CEILING and sessions["evicted"] == FLOOD - (CEILING - 3), sessions
