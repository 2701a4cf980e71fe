"""The audit trail of a real troupe process (audit.file): after a mixed run over stdio (calls that
succeed, a tool error, a server's JSON-RPC error, a cancel, a cache hit, core tools, an approval
from the CLI) one line per call with the right fields and no argument value; over HTTP, each
client and era in its own lines, the dashboard's operator acts, rotation by size with owner-only
files, the figures in /status and /metrics; `troupe audit` filtering both."""
from __future__ import annotations

import getpass
import hashlib
import os
import stat
import subprocess
from collections import Counter
from pathlib import Path

import orjson
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from actors.ops import audit_file
from tests.e2e.test_metrics import McpHttp
from tests.e2e.test_modern_http import _body, _headers, _post, _request
from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import Troupe, TroupeHttp, server, text_of

SECRETS = ("zebra-4471-text", "quokka-9053-key", "narwhal-2210-query")
HEX64 = set("0123456789abcdef")
OPERATOR, ALICE, BOB = "op-token-5c1e", "alice-token-77aa", "bob-token-31fd"


def _config(tmp_path: Path, servers: list, audit: dict, **extra) -> Path:
    path = tmp_path / "troupe.yaml"
    serve = {"startup_wait": 15, "mode": "flat", **extra.pop("serve", {})}
    path.write_text(yaml.safe_dump({"servers": servers, "serve": serve, "discovery": {"enabled": False},
                                    "audit": audit, **extra}))
    return path


def _lines(log: Path) -> list[dict]:
    return [orjson.loads(line) for line in audit_file.read_lines(str(log))]


def _cli(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([PYTHON, "-m", "actors.main", *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    return done


def _audit_json(cfg: Path, *filters: str) -> list[dict]:
    return [orjson.loads(line) for line in _cli("audit", "--config", str(cfg), "--json", *filters).stdout.splitlines()]


def test_a_mixed_run_leaves_one_line_per_call_with_its_outcome_and_no_argument_value(tmp_path):
    log = tmp_path / "audit.jsonl"
    # echo unprefixed: the one passthrough server, so an unknown tool reaches it and it answers the error
    cfg = _config(tmp_path, [server("echo", "tests.servers.echo", prefix=""),
                             server("c", "tests.servers.cached", pin=False, cache={"ttl": 60}),
                             server("slow", "tests.servers.echo", timeout=1)], {"file": "audit.jsonl"})
    t = Troupe(cfg)
    try:
        t.initialize()
        t.request("tools/list", timeout=30)
        assert text_of(t.call("echo", {"text": SECRETS[0]})) == SECRETS[0]
        assert t.call("fail")["result"]["isError"] is True
        unknown = t.call("missing_tool", {"q": SECRETS[2]})
        code = unknown["error"]["code"]
        assert "missing_tool" in unknown["error"]["message"]
        first = t.call("c__lookup", {"key": SECRETS[1], "n": 1})["result"]
        assert "troupe/cache" not in (first.get("_meta") or {})  # a miss: the server answered
        assert t.call("c__lookup", {"n": 1, "key": SECRETS[1]})["result"]["_meta"]["troupe/cache"]["hit"] is True
        late = t.call("slow__sleep", {"seconds": 10})
        assert late["result"]["isError"] is True, late  # the server's timeout, as a tool result
        slow = t.send_request("tools/call", {"name": "sleep", "arguments": {"seconds": 30}})
        wait_until(lambda: t.server_status("echo")["in_flight"] == 1, 10, message="the slow call in flight")
        t.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": slow, "reason": "x"}})
        wait_until(lambda: any(r.get("outcome") == "cancelled" for r in _lines(log)), 10, message="the cancel's line")
        approved = _cli("approve", "c", "--config", str(cfg))  # finds this troupe by its running record
        assert "c: approved" in approved.stdout
        lines = wait_until(lambda: (found := _lines(log)) and any(r["kind"] == "act" for r in found) and found, 10,
                           message="the approval's line")
        report = t.status()
    finally:
        t.close()
    assert not any(m.get("id") == slow for m in t.received)  # the cancelled call got no answer
    assert code == -32602  # echo's own answer to an unknown tool, passed through

    calls = [r for r in lines if r["kind"] == "call" and r["server"] != "troupe"]
    assert Counter((r["server"], r["target"], r["outcome"]) for r in calls) == {
        ("echo", "echo", "ok"): 1, ("echo", "fail", "is_error"): 1, ("echo", "missing_tool", "error"): 1,
        ("c", "lookup", "ok"): 1, ("c", "lookup", "cache_hit"): 1, ("slow", "sleep", "timeout"): 1,
        ("echo", "sleep", "cancelled"): 1}
    by = {(r["target"], r["outcome"]): r for r in calls}
    assert by[("missing_tool", "error")]["code"] == code and by[("sleep", "timeout")]["code"] == -32001
    assert all(r["code"] is None for r in calls if r["outcome"] not in ("error", "timeout"))
    assert 900 < by[("sleep", "timeout")]["duration_ms"] < 5000
    digest = hashlib.sha256(orjson.dumps({"key": SECRETS[1], "n": 1}, option=orjson.OPT_SORT_KEYS)).hexdigest()
    assert by[("lookup", "ok")]["args_sha256"] == by[("lookup", "cache_hit")]["args_sha256"] == digest
    assert by[("sleep", "cancelled")]["duration_ms"] > 0
    core = [r for r in lines if r["kind"] == "call" and r["server"] == "troupe"]
    assert core and {(r["target"], r["outcome"]) for r in core} == {("core_status", "ok")}
    for r in calls + core:
        assert (r["instance"], r["client"], r["profile"], r["session"], r["era"], r["method"], r["trace_id"]) == \
            (None, None, None, "stdio", "legacy", "tools/call", None)
        assert len(r["args_sha256"]) == 64 and set(r["args_sha256"]) <= HEX64 and r["duration_ms"] >= 0
        assert r["time"].endswith("Z")
    assert [(r["act"], r["server"], r["by"], r["via"]) for r in lines if r["kind"] == "act"] == \
        [("approve", "c", getpass.getuser(), "cli")]
    raw = log.read_bytes()
    assert not any(secret.encode() in raw for secret in SECRETS)  # no argument value, anywhere
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    audit = report["audit"]
    assert audit["file"] == str(log) and audit["dropped"] == 0 and audit["failed"] == 0
    assert audit["written"] >= len(calls)  # the status call's own line came after it

    # troupe audit reads what this troupe wrote
    assert [(r.get("outcome") or r["act"]) for r in _audit_json(cfg, "--server", "c")] == ["ok", "cache_hit", "approve"]
    assert {r["target"] for r in _audit_json(cfg, "--since", "1h", "--server", "troupe")} == {"core_status"}
    assert _audit_json(cfg, "--since", "2099-01-01T00:00:00Z") == []
    assert _audit_json(cfg, "--client", "anyone") == []  # every call here was anonymous
    shown = _cli("audit", "--config", str(cfg), "--server", "echo").stdout
    assert "cancelled" in shown and "is_error" in shown and f"error {code}" in shown


def _get(t: TroupeHttp, path: str) -> requests.Response:
    return requests.get(t.base + path, headers={"Authorization": f"Bearer {OPERATOR}"}, timeout=10)


def _act(t: TroupeHttp, path: str) -> requests.Response:
    return requests.post(t.base + path, headers={"Authorization": f"Bearer {OPERATOR}", "Origin": t.base}, timeout=30)


def test_clients_eras_operator_acts_and_rotation_over_http(tmp_path):
    log = tmp_path / "logs" / "audit.jsonl"
    cfg = _config(tmp_path, [server("echo", "tests.servers.echo")], {"file": "logs/audit.jsonl", "max_bytes": 2048,
                                                                      "keep": 2},
                  serve={"json_response": True, "auth_token": OPERATOR,
                         "clients": [{"name": "alice", "token": ALICE, "profile": "readers"},
                                     {"name": "bob", "token": BOB}]},
                  profiles={"readers": {}})
    t = TroupeHttp(cfg)
    alice = bob = None
    try:
        wait_until(lambda: _get(t, "/status").json()["servers"][0]["state"] == "ready", 30, message="echo ready")
        alice = McpHttp(t.url, {"Authorization": f"Bearer {ALICE}"})
        for i in range(25):
            assert text_of(alice.call("echo__echo", {"text": f"{SECRETS[0]}-{i}"})) == f"{SECRETS[0]}-{i}"
        bob = McpHttp(t.url, {"Authorization": f"Bearer {BOB}"})
        for _ in range(3):
            assert bob.call("echo__add", {"a": 1, "b": 2})["result"]["structuredContent"] == {"sum": 3}
        stateless = _post(t, _request(9, "tools/call", name="echo__add", arguments={"a": 2, "b": 3}),
                          _headers("tools/call", "echo__add", Authorization=f"Bearer {BOB}"))
        assert _body(stateless)["result"]["structuredContent"] == {"sum": 5}
        assert _act(t, "/api/approvals/echo/approve").status_code == 200
        assert _act(t, "/api/servers/echo/restart").status_code == 200
        lines = wait_until(lambda: (found := _lines(log)) and sum(r["kind"] == "act" for r in found) == 2 and found,
                           10, message="both acts' lines")
        audit = _get(t, "/status").json()["audit"]
        metrics = {s.name: s.value for f in text_string_to_metric_families(_get(t, "/metrics").text)
                   for s in f.samples if s.name.startswith("troupe_audit_")}
    finally:
        for client in (alice, bob):
            if client is not None:
                client.close()
        assert t.stop() == 0

    # rotated by size: the live file and `keep` rotated ones, none past max_bytes, all owner-only
    names = sorted(os.listdir(log.parent))
    assert names == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"], names
    for name in names:
        st = (log.parent / name).stat()
        assert stat.S_IMODE(st.st_mode) == 0o600 and 0 < st.st_size <= 2048
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert audit["rotations"] >= 2 and audit["dropped"] == 0 and audit["written"] == 25 + 4 + 2
    assert metrics["troupe_audit_records_written_total"] == 31 and metrics["troupe_audit_records_dropped_total"] == 0
    assert metrics["troupe_audit_rotations_total"] == audit["rotations"]
    # the oldest went; what is kept reads in order, the newest last
    assert len(lines) < 31 and [r["time"] for r in lines] == sorted(r["time"] for r in lines)
    assert [(r["act"], r["server"], r["by"], r["via"]) for r in lines[-2:]] == \
        [("approve", "echo", "operator", "http"), ("restart", "echo", "operator", "http")]
    bobs = [r for r in lines if r.get("client") == "bob"]
    assert [(r["era"], r["session"].startswith("http-modern-"), r["profile"]) for r in bobs] == \
        [("legacy", False, None)] * 3 + [("modern", True, None)]
    alices = [r for r in lines if r.get("client") == "alice"]
    assert alices and all((r["profile"], r["target"], r["outcome"]) == ("readers", "echo", "ok") for r in alices)
    assert len({r["args_sha256"] for r in alices}) == len(alices)  # other arguments, other digests
    assert not any(SECRETS[0].encode() in (log.parent / name).read_bytes() for name in names)

    assert _audit_json(cfg, "--client", "bob") == bobs
    assert _audit_json(cfg, "--client", "alice", "--since", "1h") == alices
    assert [r["kind"] for r in _audit_json(cfg, "--server", "echo")] == [r["kind"] for r in lines]


def test_meta_tools_and_a_workflow_leave_the_lines_of_the_calls_they_made(tmp_path):
    log = tmp_path / "audit.jsonl"
    workflow = {"name": "sum", "input_schema": {"type": "object", "properties": {"a": {"type": "integer"},
                                                                                "b": {"type": "integer"}}},
                "steps": [{"id": "s", "tool": "echo__add", "args": {"a": "{{ input.a }}", "b": "{{ input.b }}"}}],
                "output": "{{ steps.s.text }}"}
    cfg = _config(tmp_path, [server("echo", "tests.servers.echo"), server("c", "tests.servers.cached", pin=False)],
                  {"file": str(log)}, serve={"mode": "meta"}, workflows=[workflow])
    t = Troupe(cfg)
    try:
        t.initialize()
        assert "tools" in t.call("list_tools")["result"]["content"][0]["text"]  # the catalogue alone: no line
        assert text_of(t.call("call_tool", {"name": "echo__echo", "arguments": {"text": SECRETS[0]}})) == SECRETS[0]
        assert "mem://doc" in str(t.call("get_resource", {"uri": "mem://doc"})["result"])
        assert text_of(t.call("call_tool", {"name": "workflow_sum", "arguments": {"a": 20, "b": 22}})) == "42"
        assert '"servers"' in text_of(t.call("call_tool", {"name": "core_mcpserver_list"}))
        lines = wait_until(lambda: (found := _lines(log)) and len(found) >= 5 and found, 10, message="five lines")
    finally:
        t.close()
    assert [(r["method"], r["server"], r["target"], r["outcome"]) for r in lines] == [
        ("tools/call", "echo", "echo", "ok"), ("resources/read", "c", "mem://doc", "ok"),
        ("tools/call", "echo", "add", "ok"),  # the workflow's step, through the same Session
        ("tools/call", "(workflows)", "sum", "ok"), ("tools/call", "troupe", "core_mcpserver_list", "ok")]
    assert lines[1]["args_sha256"] is None  # a read has a URI, no arguments
    assert lines[3]["args_sha256"] == hashlib.sha256(b'{"a":20,"b":22}').hexdigest()
    assert lines[3]["duration_ms"] >= lines[2]["duration_ms"]  # the run holds its step
    assert {r["session"] for r in lines} == {"stdio"} and SECRETS[0].encode() not in log.read_bytes()


def test_a_restart_an_mcp_client_asks_for_is_an_act_naming_that_client(tmp_path):
    """With serve.client_admin, a client's core_service_restart is an operator act: its line says
    which client did it, and that it came over MCP."""
    log = tmp_path / "audit.jsonl"
    cfg = _config(tmp_path, [server("echo", "tests.servers.echo")], {"file": "audit.jsonl"},
                  serve={"json_response": True, "client_admin": True, "auth_token": OPERATOR,
                         "clients": [{"name": "alice", "token": ALICE}]})
    t = TroupeHttp(cfg)
    alice = None
    try:
        wait_until(lambda: _get(t, "/status").json()["servers"][0]["state"] == "ready", 30, message="echo ready")
        alice = McpHttp(t.url, {"Authorization": f"Bearer {ALICE}"})
        assert "error" not in alice.call("core_service_restart", {"name": "echo"})
        acts = wait_until(lambda: [r for r in _lines(log) if r["kind"] == "act"], 10, message="the act's line")
        assert [(a["act"], a["server"], a["by"], a["via"]) for a in acts] == [("restart", "echo", "alice", "mcp")]
        calls = [r for r in _lines(log) if r["kind"] == "call" and r["target"] == "core_service_restart"]
        assert len(calls) == 1 and calls[0]["client"] == "alice"
    finally:
        if alice is not None:
            alice.close()
        assert t.stop() == 0
