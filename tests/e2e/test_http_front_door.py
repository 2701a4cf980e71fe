"""troupe's HTTP front door against a real process: DNS rebinding, foreign Origins, non-JSON POSTs,
cross-site dashboard actions, a public bind without a token, and the same rules when embedded."""
from __future__ import annotations

import json
import os
import subprocess
import time
from urllib.parse import urlsplit

import orjson
import requests

from tests.e2e.test_embedding import start_mounted_host
from tests.e2e.test_metrics import McpHttp
from tests.support import PYTHON, ROOT, wait_until
from tests.support.troupe import TroupeHttp, server, write_config

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
REFUSAL_WAIT = 20.0  # seconds a refused start may take (interpreter start-up and config load)
NOT_JSON = ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x", "application/jsonp", None)


def _port(t) -> int:
    return urlsplit(t.base).port


def _rebinding_hosts(port: int) -> tuple[str, ...]:
    return (f"127.0.0.1.evil.com:{port}", f"127.attacker.example:{port}", f"[::1]evil.com:{port}",
            f"localhost.evil.com:{port}", f"localhost:{port + 1}")


def _echo(t) -> dict:
    return requests.get(t.base + "/status/servers/echo", timeout=5).json()


def _ready(t) -> dict:
    return wait_until(lambda: (s := _echo(t))["state"] == "ready" and s, 20, message="echo ready")


def test_rebinding_hosts_and_foreign_origins_are_refused_everywhere(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    before = _ready(t)
    port = _port(t)
    for host in _rebinding_hosts(port):
        assert requests.post(t.url, json=INIT, headers={**ACCEPT, "Host": host}, timeout=10).status_code == 403, host
        assert requests.get(t.base + "/status", headers={"Host": host}, timeout=10).status_code == 403, host
        restart = requests.post(t.base + "/api/servers/echo/restart",
                                headers={"Host": host, "Origin": f"http://{host}"}, timeout=10)
        assert restart.status_code == 403, host
    for origin in (f"http://127.0.0.1.evil.com:{port}", f"http://[::1]evil.com:{port}", "http://localhost:3000",
                   f"http://localhost:{port}.evil.com", "null"):
        assert requests.post(t.url, json=INIT, headers={**ACCEPT, "Origin": origin}, timeout=10).status_code == 403
        assert requests.get(t.base + "/status", headers={"Origin": origin}, timeout=10).status_code == 403
    # The legitimate names on the bound port, with and without a browser's Origin.
    for name in ("127.0.0.1", "localhost"):
        here = f"{name}:{port}"
        for extra in ({}, {"Origin": f"http://{here}"}):
            ok = requests.post(t.url, json=INIT, headers={**ACCEPT, "Host": here, **extra}, timeout=10)
            assert ok.status_code == 200, (here, extra)
    after = _echo(t)
    assert after["restarts"] == 0 and after["pid"] == before["pid"], "a refused request restarted echo"


def test_allowed_hosts_and_origins_are_let_in_by_equality(http_troupe):
    t = http_troupe([], allowed_hosts=["troupe.lan"], allowed_origins=["http://localhost:3000"])
    port = _port(t)
    assert requests.get(t.base + "/status", headers={"Host": f"troupe.lan:{port}"}, timeout=10).status_code == 200
    assert requests.get(t.base + "/status", headers={"Host": f"troupe.lan.evil.com:{port}"},
                        timeout=10).status_code == 403
    assert requests.get(t.base + "/status", headers={"Origin": "http://localhost:3000"}, timeout=10).status_code == 200
    assert requests.get(t.base + "/status", headers={"Origin": "http://localhost:30001"},
                        timeout=10).status_code == 403


def test_posts_that_are_not_json_get_415_and_run_nothing(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat", json_response=True)
    before = _ready(t)
    client = McpHttp(t.url)
    stop_echo = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                 "params": {"name": "core_service_stop", "arguments": {"name": "echo"}}}
    call_echo = {"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                 "params": {"name": "echo__echo", "arguments": {"text": "hi"}}}
    for kind in NOT_JSON:
        headers = {k: v for k, v in client.headers.items() if k != "Content-Type"}
        if kind is not None:
            headers["Content-Type"] = kind
        for message in (INIT, stop_echo, call_echo):
            refused = requests.post(t.url, data=orjson.dumps(message), headers=headers, timeout=10)
            assert refused.status_code == 415, (kind, message["params"])
            assert refused.json()["error"]["code"] == -32600 and "Mcp-Session-Id" not in refused.headers
    # What a client sends, parameters included, still works; the refused stop never ran.
    client.headers["Content-Type"] = "application/json; charset=utf-8"
    assert client.call("echo__echo", {"text": "ok"})["result"]["content"][0]["text"] == "ok"
    after = _echo(t)
    assert after["state"] == "ready" and after["pid"] == before["pid"] and after["calls"] == 1, after
    # GET and DELETE carry no body: no Content-Type asked of them.
    plain = {"Mcp-Session-Id": client.headers["Mcp-Session-Id"]}
    with requests.get(t.url, headers={**plain, "Accept": "text/event-stream"}, stream=True, timeout=10) as stream:
        assert stream.status_code == 200
    assert requests.delete(t.url, headers=plain, timeout=10).status_code == 200
    client.close()


def test_legacy_messages_refuse_non_json_posts(http_troupe):
    t = http_troupe([server("echo", "tests.servers.echo")], mode="flat")
    with requests.Session() as s, s.get(t.base + "/sse", stream=True, timeout=10) as stream:
        lines = stream.iter_lines(decode_unicode=True)
        endpoint = next(line for line in lines if line.startswith("data: "))[6:]
        for kind in NOT_JSON:
            headers = {} if kind is None else {"Content-Type": kind}
            refused = s.post(t.base + endpoint, data=orjson.dumps({**INIT, "id": 41}), headers=headers, timeout=10)
            assert refused.status_code == 415 and refused.json()["error"]["code"] == -32600, kind
        assert s.post(t.base + endpoint, json={**INIT, "id": 42}, timeout=10).status_code == 202
        # The first answer on the stream is the JSON one's: none of the refused ones got in.
        answer = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
        assert answer["id"] == 42 and answer["result"]["serverInfo"]["name"] == "troupe"


def test_dashboard_actions_only_from_the_dashboard_itself(http_troupe):
    token = "front-door-s3cret"
    t = http_troupe([server("echo", "tests.servers.echo")], auth_token=token)
    auth = {"Authorization": f"Bearer {token}"}
    wait_until(lambda: requests.get(t.base + "/status/servers/echo", headers=auth, timeout=5).json()["state"]
               == "ready", 20, message="echo ready")
    port, restart = _port(t), t.base + "/api/servers/echo/restart"
    here = f"http://127.0.0.1:{port}"
    for headers in ({}, {"Origin": "http://evil.example"}, {"Origin": f"http://localhost:{port}"},
                    {"Origin": here, "Sec-Fetch-Site": "cross-site"}, {"Origin": here, "Sec-Fetch-Site": "same-site"}):
        assert requests.post(restart, headers={**auth, **headers}, timeout=10).status_code == 403, headers
    # The approvals routes inherit the rule: a foreign origin is refused before routing.
    approve = t.base + "/api/approvals/echo/approve"
    assert requests.post(approve, headers={**auth, "Origin": "http://evil.example"}, timeout=10).status_code == 403
    answer = requests.post(approve, headers={**auth, "Origin": here}, timeout=10)
    assert answer.status_code == 200 and answer.json()["decision"] == "approved"
    # Same origin still needs the token.
    assert requests.post(restart, headers={"Origin": here}, timeout=10).status_code == 401
    status = requests.get(t.base + "/status/servers/echo", headers=auth, timeout=5).json()
    assert status["restarts"] == 0, "a refused action ran"
    done = requests.post(restart, headers={**auth, "Origin": here, "Sec-Fetch-Site": "same-origin"}, timeout=10)
    assert done.status_code == 200 and done.json()["restarts"] == 1


def test_a_public_bind_without_a_token_is_refused_at_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TROUPE_AUTH_TOKEN"}
    began = time.monotonic()
    proc = subprocess.run([PYTHON, "-m", "actors.main", "--transport", "http", "--host", "0.0.0.0", "--port", "0"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=REFUSAL_WAIT)
    assert proc.returncode != 0 and time.monotonic() - began < REFUSAL_WAIT
    refusal = [line for line in proc.stderr.splitlines() if "refusing to serve" in line]
    assert refusal == ["troupe: refusing to serve HTTP on 0.0.0.0 without a bearer token: set serve.auth_token "
                       "(or TROUPE_AUTH_TOKEN), or bind 127.0.0.1"], proc.stderr[-2000:]
    assert "serving" not in proc.stderr.replace("refusing to serve", "")


def test_a_public_bind_with_a_token_serves(tmp_path):
    t = TroupeHttp(write_config(tmp_path, []), "--host", "0.0.0.0", env={"TROUPE_AUTH_TOKEN": "pub-s3cret"})
    try:
        local = f"http://127.0.0.1:{_port(t)}/status"
        assert requests.get(local, timeout=10).status_code == 401
        assert requests.get(local, headers={"Authorization": "Bearer pub-s3cret"}, timeout=10).status_code == 200
    finally:
        assert t.stop() == 0


def test_embedded_app_checks_host_against_the_port_the_host_app_listens_on(tmp_path):
    proc, port = start_mounted_host(tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        status = base + "/troupe/status"
        assert requests.get(status, timeout=10).status_code == 200
        assert requests.get(status, headers={"Host": f"localhost:{port}"}, timeout=10).status_code == 200
        for host in _rebinding_hosts(port):
            assert requests.get(status, headers={"Host": host}, timeout=10).status_code == 403, host
        # troupe's own serve.port (8765) is not the port here: the host app's is.
        assert requests.get(status, headers={"Host": "127.0.0.1:8765"}, timeout=10).status_code == 403
        assert requests.post(base + "/troupe/mcp", json=INIT, headers={**ACCEPT, "Origin": f"http://evil.com:{port}"},
                             timeout=10).status_code == 403
        assert requests.post(base + "/troupe/mcp", data=orjson.dumps(INIT), timeout=10,
                             headers={**ACCEPT, "Content-Type": "text/plain"}).status_code == 415
        restart = base + "/troupe/api/servers/echo/restart"
        assert requests.post(restart, timeout=10).status_code == 403
        assert requests.post(restart, headers={"Origin": base}, timeout=10).status_code == 200
        proc.stdin.close()
        assert json.loads(proc.stdout.readline())["stopped"] is True
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
