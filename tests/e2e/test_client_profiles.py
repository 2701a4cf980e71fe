"""Clients and profiles: each client of serve.clients, known by its bearer token, sees and calls
only what its profile shows. Two real servers (notes, whose tools say whether they only read, and
echo); alice's profile is read-only on notes, bob's is echo without echo__fail, carol has none.
A hidden tool is an unknown tool in every path (lists, calls, stateless requests, meta mode's
search over stdio), one client cannot use another's session, list_changed follows the profile,
and status and metrics count by client name with no token anywhere."""
from __future__ import annotations

import json

import pytest
import requests
import yaml

from tests.e2e.test_cluster_list_changes import _get_stream
from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.troupe import Troupe, TroupeHttp, server, text_of, write_config

TOKENS = {"alice": "alice-token-7f3a9c", "bob": "bob-token-51e2d0", "carol": "carol-token-a8b4e6",
          "operator": "operator-token-2c9d11"}
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
CHANGED = "notifications/tools/list_changed"


def _config(tmp_path, mode: str = "flat"):
    config = write_config(tmp_path, [server("notes", "tests.servers.notes", pin=False),
                                     server("echo", "tests.servers.echo", pin=False)],
                          mode=mode, json_response=True, auth_token=TOKENS["operator"],
                          clients=[{"name": "alice", "token": TOKENS["alice"], "profile": "reader"},
                                   {"name": "bob", "token_env": "BOB_TOKEN", "profile": "echoer"},
                                   {"name": "carol", "token": TOKENS["carol"]}])
    data = yaml.safe_load(config.read_text())
    data["profiles"] = {"reader": {"servers": ["notes"], "read_only": True},
                        "echoer": {"servers": ["echo"], "tools": {"deny": ["echo__fail"]}}}
    config.write_text(yaml.safe_dump(data))
    return config


@pytest.fixture
def troupe(tmp_path):
    t = TroupeHttp(_config(tmp_path), env={"BOB_TOKEN": TOKENS["bob"]})
    try:
        wait_until(lambda: all(s["state"] == "ready" for s in _status(t)["servers"]), 30, message="servers ready")
        yield t
    finally:
        t.stop()


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", headers=_auth("operator"), timeout=10).json()


def _auth(name: str) -> dict:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def _names(client: McpHttp) -> set[str]:
    return {t["name"] for t in client.request("tools/list")["result"]["tools"]}


def _unknown(answer: dict) -> bool:
    return answer.get("error", {}).get("code") == -32602 and "unknown tool" in answer["error"]["message"]


def test_each_client_sees_and_calls_only_its_profile(troupe):
    for headers in ({}, {"Authorization": "Bearer not-a-client"}):
        refused = requests.post(troupe.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                headers={"Content-Type": "application/json", **headers}, timeout=10)
        assert refused.status_code == 401, refused.text
    alice, bob, carol = (McpHttp(troupe.url, _auth(n)) for n in ("alice", "bob", "carol"))
    assert _names(alice) == {"notes__read_note", "notes__list_notes"}  # read-only, notes only, no core tools
    bob_sees = _names(bob)
    assert "echo__echo" in bob_sees and "echo__fail" not in bob_sees
    assert not any(n.startswith("notes__") or n.startswith("core_") for n in bob_sees)
    carol_sees = _names(carol)
    assert {"notes__write_note", "echo__fail", "core_status"} <= carol_sees
    assert text_of(alice.call("notes__read_note", {"name": "welcome"})) == "hello from the notes server"
    for client, tool in ((alice, "notes__write_note"), (alice, "echo__echo"), (alice, "core_status"),
                         (bob, "echo__fail"), (bob, "notes__read_note")):
        assert _unknown(client.call(tool, {"name": "x", "text": "x"})), tool
    assert text_of(carol.call("notes__write_note", {"name": "x", "text": "y"})) == "written"
    # the stateless era too: alice's modern tools/list and call see her profile alone
    modern = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
              "MCP-Protocol-Version": MODERN, **_auth("alice")}
    listed = requests.post(troupe.url, json={"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": META}},
                           headers={**modern, "Mcp-Method": "tools/list"}, timeout=10).json()
    assert {t["name"] for t in listed["result"]["tools"]} == {"notes__read_note", "notes__list_notes"}
    hidden = requests.post(troupe.url, json={"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {
        "name": "echo__echo", "arguments": {"text": "hi"}, "_meta": META}},
        headers={**modern, "Mcp-Method": "tools/call", "Mcp-Name": "echo__echo"}, timeout=10).json()
    assert _unknown(hidden), hidden
    # one client cannot use another's session: bob with alice's session id is told it does not exist
    stolen = requests.post(troupe.url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, timeout=10,
                           headers={**bob.headers, "Mcp-Session-Id": alice.headers["Mcp-Session-Id"]})
    assert stolen.status_code == 404, stolen.text
    for c in (alice, bob, carol):
        c.close()


def test_list_changed_follows_the_profile(troupe):
    alice, bob, carol = (McpHttp(troupe.url, _auth(n)) for n in ("alice", "bob", "carol"))
    streams = {name: _get_stream(client) for name, client in (("alice", alice), ("bob", bob))}
    try:
        # each has its list (a client that never listed has nothing to refresh: it is told nothing)
        assert "echo__late_tool" not in _names(bob) and "notes__count_notes" not in _names(alice)
        assert text_of(carol.call("echo__notify_change")) == "changed"  # echo changes: bob's business only
        wait_until(lambda: CHANGED in streams["bob"].methods(), 15, message="bob told of echo's change")
        assert "echo__late_tool" in _names(bob)
        assert text_of(carol.call("notes__grow")) == "grown"  # notes gains a read-only tool: alice's business
        wait_until(lambda: CHANGED in streams["alice"].methods(), 15, message="alice told of notes' change")
        # alice's stream is ordered: echo's change would have come first, and it did not
        assert streams["alice"].methods().count(CHANGED) == 1, streams["alice"].methods()
        assert "notes__count_notes" in _names(alice)
    finally:
        for s in streams.values():
            s.close()


def test_status_and_metrics_count_by_client_and_show_no_token(troupe):
    alice, bob = McpHttp(troupe.url, _auth("alice")), McpHttp(troupe.url, _auth("bob"))
    alice.call("notes__list_notes")
    alice.call("notes__list_notes")
    bob.request("tools/list")
    clients = _status(troupe)["clients"]
    assert clients["alice"]["profile"] == "reader" and clients["alice"]["tool_calls"] == 2
    assert clients["alice"]["requests"] == 3 and clients["alice"]["sessions"] == 1  # initialize + 2 calls
    assert clients["bob"]["requests"] == 2 and clients["bob"]["tool_calls"] == 0
    metrics = _scrape(troupe)
    assert metrics[("troupe_client_tool_calls_total", frozenset({("client", "alice"), ("profile", "reader")}))] == 2
    assert requests.get(troupe.base + "/status", headers=_auth("carol"), timeout=10).status_code == 401
    seen = json.dumps(_status(troupe)) + requests.get(troupe.base + "/metrics", headers=_auth("operator"),
                                                      timeout=10).text + "".join(troupe.stderr)
    assert not any(token in seen for token in TOKENS.values())


def test_stdio_profile_in_meta_mode_searches_and_calls_within_it(tmp_path):
    t = Troupe(_config(tmp_path, mode="meta"), "--profile", "reader", env={"BOB_TOKEN": TOKENS["bob"]})
    try:
        t.initialize()
        listed = json.loads(text_of(t.call("list_tools")))
        names = {tool["name"] for tool in listed["tools"]}
        assert names == {"notes__read_note", "notes__list_notes"}, names
        found = json.loads(text_of(t.call("filter_tools", {"query": "echo"})))
        assert all(tool["name"].startswith("notes__") for tool in found["tools"]), found
        answer = t.call("call_tool", {"name": "echo__echo", "arguments": {"text": "hi"}})
        assert answer["result"].get("isError") and "unknown tool" in text_of(answer), answer
        assert text_of(t.call("call_tool", {"name": "notes__read_note", "arguments": {"name": "welcome"}})) \
            == "hello from the notes server"
    finally:
        t.close()


def _scrape(t: TroupeHttp) -> dict:
    from prometheus_client.parser import text_string_to_metric_families
    text = requests.get(t.base + "/metrics", headers=_auth("operator"), timeout=10).text
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}
