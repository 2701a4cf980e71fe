"""JSON-RPC batches: accepted for protocol 2025-03-26 (stdio and HTTP), refused for other versions."""
from __future__ import annotations

import requests

from tests.support import wait_until
from tests.support.schema import validate_message
from tests.support.troupe import Troupe, TroupeHttp, server, write_config

BATCH = [{"jsonrpc": "2.0", "id": 10, "method": "ping"},
         {"jsonrpc": "2.0", "method": "notifications/initialized"},
         {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "echo__echo", "arguments": {"text": "b"}}},
         {"jsonrpc": "2.0", "id": 12, "method": "no/such"},
         {"jsonrpc": "2.0", "id": 13}]  # neither request nor response: answered, or the batch would never end


def _init(version: str) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _check(answers: list) -> None:
    by_id = {a["id"]: a for a in answers}
    assert set(by_id) == {10, 11, 12, 13}
    assert by_id[13]["error"]["code"] == -32600
    assert by_id[10]["result"] == {}
    assert by_id[11]["result"]["content"][0]["text"] == "b"
    assert by_id[12]["error"]["code"] == -32601
    for answer in answers:
        validate_message(answer, "server", version="2025-03-26")


def test_batches_over_stdio(tmp_path):
    t = Troupe(write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat"))
    try:
        t.send(_init("2025-03-26"))
        wait_until(lambda: any(m.get("id") == 1 for m in t.received if isinstance(m, dict)), 20, message="init")
        t.request("tools/list", timeout=30)
        before = len(t.received)
        t.proc.stdin.write(__import__("orjson").dumps(BATCH) + b"\n")
        t.proc.stdin.flush()
        wait_until(lambda: any(isinstance(m, list) for m in t.received[before:]), 20, message="batch answer")
        _check(next(m for m in t.received[before:] if isinstance(m, list)))
    finally:
        t.close()


def test_batches_over_http_and_refused_for_newer_versions(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [server("echo", "tests.servers.echo")], mode="flat"))
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    try:
        with requests.Session() as s:
            old = s.post(t.url, json=_init("2025-03-26"), headers={**headers, "Accept": "application/json"}, timeout=20)
            sid = old.headers["Mcp-Session-Id"]
            answer = s.post(t.url, json=BATCH, headers={**headers, "Mcp-Session-Id": sid}, timeout=30)
            assert answer.status_code == 200
            _check(answer.json())
            new = s.post(t.url, json=_init("2025-11-25"), headers={**headers, "Accept": "application/json"}, timeout=20)
            refused = s.post(t.url, json=BATCH, headers={**headers, "Mcp-Session-Id": new.headers["Mcp-Session-Id"]},
                             timeout=20)
            assert refused.json()["error"]["code"] == -32600
    finally:
        t.stop()
