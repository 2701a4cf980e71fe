"""Legacy sessions in a cluster of three troupes on one real Redis: a session's id names its owner;
used through another instance it is proxied to the owner (calls, lists, its GET stream, /sse's
/messages); a dead owner's session is a 404 and a new initialize anywhere works; a Redis that is
down refuses new sessions with 503; and the example HAProxy config pins a session to its owner."""
from __future__ import annotations

import itertools
import re
import subprocess
import time
from pathlib import Path

import pytest
import requests
import yaml

from actors.serve.session_proxy import instance_tag
from tests.support import ROOT, free_port, wait_until
from tests.support.ports import stop
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server

pytestmark = pytest.mark.slow  # three troupes, a redis-server (and an haproxy)
PROTOCOL = "2025-06-18"
NAMES = ("troupe-a", "troupe-b", "troupe-c")  # the instance names config/haproxy.cfg expects
HAPROXY_CFG = ROOT / "config" / "haproxy.cfg"
AUTH = {"Authorization": "Bearer cluster-sessions-test-token"}  # clients' token; instances use the secret
_POST = {"Content-Type": "application/json", **AUTH}
_ids = itertools.count(1)


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


def _configs(tmp_path: Path, redis_url: str, **serve) -> list[Path]:
    out = []
    for name in NAMES:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({
            "servers": [server("echo", "tests.servers.echo", placement="replicated")],
            "serve": {"startup_wait": 15, "mode": "flat", **serve}, "discovery": {"enabled": False},
            "cluster": {"redis": redis_url, "instance": name, "lease": 3}}))
        out.append(path)
    return out


def _joined(t: TroupeHttp, count: int = 3) -> bool:
    cluster = requests.get(t.base + "/status", headers=AUTH, timeout=10).json()["cluster"]
    return cluster["joined"] and isinstance(cluster["instances"], list) and len(cluster["instances"]) == count


@pytest.fixture
def troupes(tmp_path, redis):
    # With serve.auth_token: a proxied request gets past the owner's front door by the cluster secret.
    token = AUTH["Authorization"].split()[1]
    started = [TroupeHttp(config) for config in _configs(tmp_path, redis.url, auth_token=token)]
    try:
        for t in started:
            wait_until(lambda t=t: _joined(t), 20, message="every instance joined and listed")
        yield started
    finally:
        for t in started:
            if t.proc.poll() is None:
                t.stop()


def _headers(sid: str | None = None) -> dict:
    out = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **AUTH}
    if sid:
        out.update({"Mcp-Session-Id": sid, "MCP-Protocol-Version": PROTOCOL})
    return out


def _post(url: str, method: str, params: dict | None = None, sid: str | None = None,
          notify: bool = False) -> requests.Response:
    body: dict = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if not notify:
        body["id"] = next(_ids)
    return requests.post(url, json=body, headers=_headers(sid), timeout=30)


def _answer(resp: requests.Response) -> dict:
    """The JSON-RPC answer of a POST, whether it came as JSON or as an SSE stream."""
    assert resp.status_code == 200, (resp.status_code, resp.text)
    if resp.headers["Content-Type"].startswith("application/json"):
        return resp.json()
    datas = [line[5:].strip() for line in resp.text.splitlines() if line.startswith("data:")]
    return yaml.safe_load(datas[-1])


def _initialize(url: str) -> str:
    resp = _post(url, "initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                     "clientInfo": {"name": "troupe-tests", "version": "1"}})
    assert "result" in _answer(resp), resp.text
    sid = resp.headers["Mcp-Session-Id"]
    assert _post(url, "notifications/initialized", sid=sid, notify=True).status_code == 202
    return sid


def _echo(url: str, sid: str, text: str) -> str:
    answer = _answer(_post(url, "tools/call", {"name": "echo__echo", "arguments": {"text": text}}, sid=sid))
    assert "result" in answer, answer
    return answer["result"]["content"][0]["text"]


def test_a_session_made_on_one_instance_works_through_the_others(troupes):
    a, b, c = troupes
    sid = _initialize(a.url)
    assert sid.startswith(instance_tag("troupe-a") + ".")
    for t in (b, c, a):  # proxied by B and C, answered by A itself
        tools = _answer(_post(t.url, "tools/list", sid=sid))["result"]["tools"]
        assert "echo__echo" in {tool["name"] for tool in tools}
        assert "hello" in _echo(t.url, sid, f"hello via {t.base}")
    # The session lives on A only: B and C hold none of their own.
    for t in (b, c):
        assert _sessions(t)["open"] == 0 and _sessions(t)["proxied"] >= 2
    assert _sessions(a)["open"] == 1 and _sessions(a)["proxied"] == 0
    # Its GET stream opens through a non-owner and is streamed (the first event arrives, unbuffered).
    with requests.get(b.url, headers={**_headers(sid), "Accept": "text/event-stream"}, stream=True,
                      timeout=30) as stream:
        assert stream.status_code == 200 and stream.headers["Content-Type"] == "text/event-stream"
        assert stream.headers["Mcp-Session-Id"] == sid
        first = next(stream.iter_lines())
        assert first.startswith(b":")
    # Proxy hop, measured: a tools/call through B against the same call on A.
    direct, hop = _median_call(a.url, sid), _median_call(b.url, sid)
    print(f"tools/call p50 on the owner {direct * 1000:.1f} ms, through another instance {hop * 1000:.1f} ms")
    # The loop guard: a request that says it was proxied already is answered where it lands (B has
    # no such session: 404), never passed on again.
    before = _sessions(b)["proxied"]
    guarded = requests.post(b.url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                            headers={**_headers(sid), "X-Troupe-Proxied": "troupe-c"}, timeout=10)
    assert guarded.status_code == 404 and _sessions(b)["proxied"] == before
    # Without the client's bearer token nothing passes, proxied or not.
    assert requests.post(b.url, json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                         headers={k: v for k, v in _headers(sid).items() if k != "Authorization"},
                         timeout=10).status_code == 401
    # DELETE through C ends it on A; then every instance says 404.
    assert requests.delete(c.url, headers=_headers(sid), timeout=10).status_code == 200
    for t in troupes:
        assert _post(t.url, "tools/list", sid=sid).status_code == 404


def _median_call(url: str, sid: str, n: int = 15) -> float:
    times = []
    for i in range(n):
        started = time.perf_counter()
        _echo(url, sid, str(i))
        times.append(time.perf_counter() - started)
    return sorted(times)[n // 2]


def test_legacy_sse_messages_through_another_instance(troupes):
    a, b, _ = troupes
    with requests.get(a.base + "/sse", headers={"Accept": "text/event-stream", **AUTH}, stream=True,
                      timeout=30) as stream:
        lines = stream.iter_lines()
        endpoint = next(line for line in lines if line.startswith(b"data:")).decode()[5:].strip()
        assert re.search(r"session_id=troupe-a\.", endpoint), endpoint
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        resp = requests.post(b.base + endpoint, json=init, headers=_POST, timeout=10)
        assert resp.status_code == 202, resp.text
        answer = next(line for line in lines if line.startswith(b"data:"))
        assert b'"id":1' in answer and b"result" in answer
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "echo__echo", "arguments": {"text": "over sse"}}}
        assert requests.post(b.base + endpoint, json=call, headers=_POST,
                             timeout=10).status_code == 202
        answer = next(line for line in lines if line.startswith(b"data:"))
        assert b"over sse" in answer


def test_a_dead_owner_means_404_and_a_new_session_anywhere(troupes):
    a, b, c = troupes
    sid = _initialize(a.url)
    assert "x" in _echo(b.url, sid, "x")
    a.proc.kill()  # no goodbye: its registry entry stays until its TTL, its port refuses
    a.proc.wait(10)
    resp = _post(b.url, "tools/list", sid=sid)
    assert resp.status_code == 404, resp.text
    assert requests.get(c.url, headers={**_headers(sid), "Accept": "text/event-stream"},
                        timeout=10).status_code == 404
    fresh = _initialize(b.url)
    assert fresh.startswith("troupe-b.")
    assert "again" in _echo(c.url, fresh, "again")
    # An owner that stops cleanly leaves the registry at once: its sessions are 404 too.
    on_c = _initialize(c.url)
    assert "y" in _echo(b.url, on_c, "y")
    assert c.stop() == 0
    assert _post(b.url, "tools/list", sid=on_c).status_code == 404
    assert "still" in _echo(b.url, fresh, "still")


def test_redis_down_refuses_new_sessions_with_503(troupes, redis):
    a = troupes[0]
    redis.stop()
    resp = _post(a.url, "initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                       "clientInfo": {"name": "t", "version": "1"}})
    assert resp.status_code == 503, resp.text
    assert "Redis" in resp.json()["error"]["message"]
    assert requests.get(a.base + "/sse", headers={"Accept": "text/event-stream", **AUTH},
                        timeout=10).status_code == 503


def test_example_haproxy_config_is_valid():
    done = subprocess.run(["haproxy", "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def _haproxy_cfg(listen: int, ports: list[int]) -> str:
    """The example config with this test's ports (8700 is HAProxy's, 8701..8703 the troupes')."""
    text = HAPROXY_CFG.read_text()
    for example, port in zip((8701, 8702, 8703), ports):
        text = text.replace(f"127.0.0.1:{example}", f"127.0.0.1:{port}")
    return text.replace("127.0.0.1:8700", f"127.0.0.1:{listen}")


def test_haproxy_pins_a_legacy_session_to_its_owner(tmp_path, redis):
    # The troupes accept the Host clients send HAProxy: its port is picked first, then bound by it.
    front = free_port()
    started = [TroupeHttp(config) for config in _configs(tmp_path, redis.url, allowed_hosts=[f"127.0.0.1:{front}"])]
    proc = None
    try:
        for t in started:
            wait_until(lambda t=t: _joined(t), 20, message="every instance joined")
        ports = [int(t.base.rsplit(":", 1)[1]) for t in started]
        cfg = tmp_path / "haproxy.cfg"
        cfg.write_text(_haproxy_cfg(front, ports))
        proc = subprocess.Popen(["haproxy", "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                                stderr=open(tmp_path / "haproxy.log", "wb"))
        url = f"http://127.0.0.1:{front}/mcp"

        def up() -> bool:
            try:
                return requests.get(f"http://127.0.0.1:{front}/status", timeout=2).status_code == 200
            except requests.ConnectionError:
                return False
        wait_until(up, 15, interval=0.1, message="haproxy listening")
        sid = _initialize(url)
        owner = sid.split(".", 1)[0]
        assert owner in NAMES
        for i in range(6):
            assert str(i) in _echo(url, sid, str(i))
        # Every request of the session reached its owner itself: no instance had to proxy one.
        for t, name in zip(started, NAMES):
            sessions = _sessions(t)
            assert sessions["open"] == (1 if name == owner else 0) and sessions["proxied"] == 0, (name, sessions)
        # Stateless requests are spread round-robin: status answers come from more than one instance.
        seen = {requests.get(f"http://127.0.0.1:{front}/status", timeout=5).json()["cluster"]["instance"]
                for _ in range(6)}
        assert len(seen) > 1, seen
    finally:
        if proc is not None:
            stop(proc)
        for t in started:
            t.stop()


def _sessions(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", headers=AUTH, timeout=10).json()["sessions"]
