"""troupe embedded in gevent host apps; each test is its own process (monkey-patching is process-wide)."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import textwrap
import threading
import time

import pytest
import requests
from mcp import Client

from tests.support import PYTHON, ROOT, wait_until

RUN_TIMEOUT = 90.0  # seconds one host script may run

# The host's first lines: patch, then import troupe; echo servers run on this interpreter.
PATCHED = """
from gevent import monkey
monkey.patch_all()
"""
COMMON = """
import gc, json, os, sys, time
import gevent, greenlet, pykka
import actors
from actors.embed import McpError, ToolError, mount


def echo(name, **extra):
    return {"name": name, "max_in_flight": 128, "transport": {"type": "stdio", "stdio": {
        "command": sys.executable, "args": ["-m", "tests.servers.echo"], "work_dir": os.getcwd()}}, **extra}


def done(**result):
    print(json.dumps(result), flush=True)
"""


def _script(tmp_path, body: str, prelude: str = PATCHED) -> list[str]:
    path = tmp_path / "host.py"
    path.write_text(prelude + COMMON + textwrap.dedent(body))
    return [PYTHON, str(path)]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(tmp_path, body: str, prelude: str = PATCHED) -> dict:
    proc = subprocess.run(_script(tmp_path, body, prelude), cwd=ROOT, env=_env(), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"host exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}" \
                                           f"\nstderr:\n{proc.stderr[-5000:]}"
    return json.loads(lines[-1])


def test_200_greenlets_call_tools_concurrently_through_the_handle(tmp_path):
    out = _run(tmp_path, """
        # serve.mode meta: the handle still calls tools flat, by qualified name
        troupe = actors.start({"servers": [echo(f"e{i}") for i in range(4)],
                               "serve": {"mode": "meta", "startup_wait": 20}})
        names = {t["name"] for t in troupe.list_tools()}
        gaps, running = [], [True]

        def ticker():  # the host's own greenlets keep running while calls are out
            last = time.monotonic()
            while running[0]:
                gevent.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        def one(i):
            began = time.monotonic()
            slept = troupe.call_tool(f"e{i % 4}__sleep", {"seconds": 0.5})
            added = troupe.call_tool(f"e{i % 4}__add", {"a": i, "b": 1000})
            return time.monotonic() - began, slept, added["structuredContent"]["sum"] == i + 1000

        tick = gevent.spawn(ticker)
        began = time.monotonic()
        jobs = [gevent.spawn(one, i) for i in range(200)]
        gevent.joinall(jobs, timeout=60)
        wall = time.monotonic() - began
        running[0] = False
        tick.join(timeout=1)
        failed = troupe.call_tool("e0__fail")
        try:
            troupe.call_tool("e9__nope", {})
            unknown = None
        except ToolError as exc:
            unknown = exc.code
        try:  # the handle checks what its host sends, as the fronts check their clients
            troupe.call_tool("e0__echo", ["not", "an", "object"])
            malformed = None
        except ToolError as exc:
            malformed = [exc.code, str(exc)]
        troupe.stop()
        done(names=sorted(names), wall=wall, ok=sum(1 for j in jobs if j.successful()),
             slept=sum(1 for j in jobs if j.successful() and j.value[1]["content"][0]["text"] == "slept"),
             sums=sum(1 for j in jobs if j.successful() and j.value[2]),
             sum_of_calls=sum(j.value[0] for j in jobs if j.successful()), max_gap=max(gaps),
             failed=failed, unknown=unknown, malformed=malformed)
    """)
    assert {"e0__sleep", "e3__add", "core_status"} <= set(out["names"])
    assert "call_tool" not in out["names"]  # flat, whatever serve.mode says
    assert out["ok"] == out["slept"] == out["sums"] == 200
    # Real concurrency: 200 calls of 0.5 s end in about one call's time, not 100 s.
    assert out["wall"] < 5.0, out["wall"]
    assert out["sum_of_calls"] > 20 * out["wall"]
    # starved means waiting for the calls (seconds); a loaded 2-core machine alone can cost 0.6 s
    assert out["max_gap"] < 1.5, "the host's own greenlets were starved"
    assert out["failed"]["isError"] is True and out["failed"]["content"][0]["text"] == "boom"
    assert out["unknown"] == -32602
    assert out["malformed"][0] == -32602 and "params.arguments must be an object, got array" in out["malformed"][1]


# Records what `import actors` loads, before anything else of the host's is imported.
IMPORT_ACTORS = "import sys\n_before = set(sys.modules)\nimport actors\nIMPORTED = set(sys.modules) - _before\n"

def test_100_greenlets_on_one_server_all_get_answers_beyond_max_in_flight(tmp_path):
    out = _run(tmp_path, """
        troupe = actors.start({"servers": [echo("one")], "serve": {"mode": "flat", "startup_wait": 20}})
        troupe.wait_ready()

        def one(i):
            return troupe.call_tool("one__sleep", {"seconds": 0.2})["content"][0]["text"]
        jobs = [gevent.spawn(one, i) for i in range(100)]
        gevent.joinall(jobs, timeout=30)
        troupe.stop()
        done(answers=[j.value for j in jobs if j.successful()])
    """)
    # max_in_flight is 64: the other 36 wait their turn instead of being told "busy"
    assert out["answers"] == ["slept"] * 100



@pytest.mark.parametrize("prelude, missing", [
    ("", "threading, queue, socket"),
    ("from gevent import monkey\nmonkey.patch_all(thread=False)\n", "threading"),
], ids=["unpatched", "thread-false"])
def test_start_refuses_a_host_that_is_not_patched(tmp_path, prelude, missing):
    out = _run(tmp_path, """
        began = time.monotonic()
        try:
            actors.start({"servers": [echo("e")]})
            error = None
        except actors.embed.NotPatchedError as exc:
            error = str(exc)
        done(error=error, took=time.monotonic() - began, actors=len(pykka.ActorRegistry.get_all()),
             imported=sorted(IMPORTED), runtime_loaded="actors.runtime" in sys.modules,
             children=len(__import__("tests.support.troupe", fromlist=["x"]).children_of(os.getpid())))
    """, prelude=prelude + IMPORT_ACTORS)
    assert out["error"] is not None, "start() did not refuse"
    assert f"{missing} {'is' if ',' not in missing else 'are'} not patched" in out["error"]
    assert "from gevent import monkey; monkey.patch_all()" in out["error"]
    assert out["took"] < 2.0 and out["actors"] == 0 and out["children"] == 0
    # `import actors` loads nothing heavy (no gevent, pykka, loguru…) and patches nothing
    assert set(out["imported"]) - {"__future__"} == {"actors"}, out["imported"]
    assert out["runtime_loaded"] is False, "a refused start must not get as far as the runtime"


MOUNTED_HOST = """
    from gevent.fileobject import FileObjectPosix
    from gevent.pywsgi import WSGIServer

    def host(environ, start_response):
        if environ["PATH_INFO"] == "/hello":
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"hello from the host"]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"host: no such route"]

    troupe = actors.start({"servers": [echo("echo")], "serve": {"mode": "flat", "startup_wait": 20}})
    server = WSGIServer(("127.0.0.1", 0), mount("/troupe", actors.wsgi_app(troupe), host), log=None)
    server.start()
    troupe.wait_ready()
    done(port=server.server_port)
    FileObjectPosix(sys.stdin.fileno(), "rb").read()  # serve until the test closes our stdin
    troupe.stop()
    server.stop(timeout=1)
    done(stopped=True, actors=len(pykka.ActorRegistry.get_all()))
"""
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _sse_data(text: str) -> dict:
    return json.loads([line[6:] for line in text.splitlines() if line.startswith("data: ")][-1])


def start_mounted_host(tmp_path) -> tuple[subprocess.Popen, int]:
    """The example gevent host with troupe mounted at /troupe: (its process, its port)."""
    proc = subprocess.Popen(_script(tmp_path, MOUNTED_HOST), cwd=ROOT, env=_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    threading.Thread(target=lambda: stderr.extend(proc.stderr), daemon=True).start()
    first = proc.stdout.readline()
    if not first.startswith("{"):
        proc.kill()
        proc.wait()
        raise AssertionError(f"host did not start: {first!r}\n{''.join(stderr[-40:])}")
    return proc, json.loads(first)["port"]


def test_mounted_wsgi_app_serves_mcp_and_the_hosts_routes_on_one_port(tmp_path):
    proc, port = start_mounted_host(tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        with requests.Session() as s:
            assert s.get(base + "/hello", timeout=5).text == "hello from the host"
            assert s.get(base + "/nope", timeout=5).status_code == 404
            status = s.get(base + "/troupe/status", timeout=10).json()
            assert [x["state"] for x in status["servers"]] == ["ready"]
            init = s.post(base + "/troupe/mcp", json=INIT, headers=ACCEPT, timeout=10)
            assert init.status_code == 200 and _sse_data(init.text)["result"]["serverInfo"]["name"] == "troupe"
            # Legacy SSE names its POST endpoint under the mount point (SCRIPT_NAME).
            with s.get(base + "/troupe/sse", stream=True, timeout=10) as stream:
                lines = stream.iter_lines(decode_unicode=True)
                endpoint = next(line for line in lines if line.startswith("data: "))[6:]
                assert endpoint.startswith("/troupe/messages?session_id=")
                posted = s.post(base + endpoint, json=INIT, timeout=10)
                assert posted.status_code == 202
                answer = next(line for line in lines if line.startswith("data: "))
                assert json.loads(answer[6:])["result"]["serverInfo"]["name"] == "troupe"

        async def sdk():  # a real MCP client on the mounted endpoint
            async with Client(base + "/troupe/mcp", mode="legacy") as client:
                names = {tool.name for tool in (await client.list_tools()).tools}
                assert {"echo__echo", "core_status"} <= names
                result = await client.call_tool("echo__add", {"a": 2, "b": 3})
                assert result.structured_content == {"sum": 5}
        asyncio.run(asyncio.wait_for(sdk(), 60))

        # One port, no head-of-line blocking: the host answers while a slow MCP call is out.
        slow: dict = {}

        def slow_call():
            with requests.Session() as s:
                sid = s.post(base + "/troupe/mcp", json=INIT, headers=ACCEPT, timeout=10).headers["Mcp-Session-Id"]
                call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "echo__sleep", "arguments": {"seconds": 1.5}}}
                slow["answer"] = s.post(base + "/troupe/mcp", json=call, timeout=20,
                                        headers={**ACCEPT, "Mcp-Session-Id": sid, "Accept": "application/json"}).json()
        worker = threading.Thread(target=slow_call)
        worker.start()
        wait_until(lambda: _in_flight(base) == 1, timeout=10, message="the slow call to be in flight")
        began = time.monotonic()
        assert requests.get(base + "/hello", timeout=5).status_code == 200
        assert time.monotonic() - began < 0.5
        worker.join(timeout=20)
        assert slow["answer"]["result"]["content"][0]["text"] == "slept"

        proc.stdin.close()
        last = json.loads(proc.stdout.readline())
        assert last == {"stopped": True, "actors": 0}
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _in_flight(base: str) -> int:
    return requests.get(base + "/troupe/status", timeout=5).json()["servers"][0]["in_flight"]


def test_stop_leaves_no_actors_greenlets_or_children_and_the_host_runs_on(tmp_path):
    out = _run(tmp_path, """
        import http.client
        from gevent.pywsgi import WSGIServer
        from tests.support.troupe import children_of

        def live_greenlets():
            return sum(1 for o in gc.get_objects() if isinstance(o, greenlet.greenlet) and not o.dead)

        def poll(condition, timeout=10.0):
            deadline = time.monotonic() + timeout
            while not condition() and time.monotonic() < deadline:
                gevent.sleep(0.02)
            return condition()

        def request(method, path, body=None, headers=None):
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
            conn.request(method, path, body=body, headers={"Connection": "close", **(headers or {})})
            resp = conn.getresponse()
            data = resp.read()
            conn.close()
            return resp.status, data

        slot = {}

        def host(environ, start_response):
            if environ["PATH_INFO"] == "/hello":
                start_response("200 OK", [("Content-Type", "text/plain")])
                return [b"hello"]
            if "troupe" in slot:
                return slot["troupe"](environ, start_response)
            start_response("404 Not Found", [])
            return [b""]

        server = WSGIServer(("127.0.0.1", 0), host, log=None)
        server.start()
        request("GET", "/hello")  # warm up the host (resolver, pools) before the baseline
        gc.collect()
        base_greenlets, pid = live_greenlets(), os.getpid()

        audit = os.path.join(os.environ["TROUPE_CONFIG_DIR"], "embedded-audit.jsonl")  # its writer stops too
        troupe = actors.start({"servers": [echo("a"), echo("b")], "serve": {"mode": "flat", "startup_wait": 20},
                               "audit": {"file": audit}})
        slot["troupe"] = mount("/troupe", actors.wsgi_app(troupe), host)
        seen = []
        troupe.subscribe(["ToolsChanged", "ServerStateChanged"], seen.append)
        troupe.subscribe(None, lambda event: 1 / 0)  # a failing subscriber is only logged
        troupe.wait_ready()
        assert troupe.call_tool("a__echo", {"text": "x"})["content"][0]["text"] == "x"
        init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}})
        http_init, _ = request("POST", "/troupe/mcp", init, {"Content-Type": "application/json",
                                                             "Accept": "application/json"})
        registered = troupe.register_server("late", command=sys.executable, args=["-m", "tests.servers.echo"],
                                            cwd=os.getcwd())
        assert registered["state"] == "pending-approval" and registered["provenance"] == "registered"
        assert [r["name"] for r in troupe.approvals()] == ["late"]
        registered = troupe.approve("late")  # the host app is this troupe's operator
        late = troupe.call_tool("late__add", {"a": 1, "b": 2})["structuredContent"]["sum"]
        children_running = len(children_of(pid))
        actors_running = len(pykka.ActorRegistry.get_all())

        def long_call():
            began = time.monotonic()
            try:
                troupe.call_tool("a__sleep", {"seconds": 30})
                return "answered", time.monotonic() - began
            except RuntimeError as exc:
                return str(exc), time.monotonic() - began
        caller = gevent.spawn(long_call)
        poll(lambda: troupe.status()["servers"][0]["in_flight"] == 1)

        troupe.stop()
        troupe.stop()  # idempotent
        caller.join(timeout=5)
        actors_after = len(pykka.ActorRegistry.get_all())
        no_children = poll(lambda: not children_of(pid))
        gc.collect()
        greenlets_back = poll(lambda: live_greenlets() <= base_greenlets)
        try:
            troupe.call_tool("a__echo", {"text": "x"})
            after_stop = None
        except RuntimeError as exc:
            after_stop = str(exc)

        # The host runs on: its server answers, its greenlets work.
        hello = request("GET", "/hello")
        work = [gevent.spawn(lambda i=i: i * i) for i in range(50)]
        gevent.joinall(work, timeout=5)
        server.stop(timeout=1)
        done(http_init=http_init, registered=registered["state"], late=late, children_running=children_running,
             actors_running=actors_running, actors_after=actors_after, no_children=no_children,
             greenlets_back=greenlets_back, greenlets=[base_greenlets, live_greenlets()], after_stop=after_stop,
             hello=[hello[0], hello[1].decode()], work=sum(j.value for j in work),
             saw_events=sorted({e.kind for e in seen}), long_call=caller.value,
             audit=[[r["kind"], r.get("act") or r.get("target"), r.get("via") or r.get("outcome")]
                    for r in map(json.loads, open(audit))])
    """)
    assert out["http_init"] == 200 and out["registered"] == "ready" and out["late"] == 3
    assert out["children_running"] == 3 and out["actors_running"] >= 8
    assert out["actors_after"] == 0
    assert out["no_children"] is True
    assert out["greenlets_back"] is True, out["greenlets"]
    assert out["after_stop"] == "this troupe handle is stopped"
    assert out["hello"] == [200, "hello"] and out["work"] == sum(i * i for i in range(50))
    assert {"ToolsChanged", "ServerStateChanged"} <= set(out["saw_events"])
    # A call in flight fails at once when the handle stops, instead of waiting out its timeout.
    assert out["long_call"][0] == "this troupe handle was stopped during tools/call"
    assert out["long_call"][1] < 10
    # the embedding API's approval and the handle's calls are in the audit trail
    assert ["act", "approve", "embedded"] in out["audit"] and ["call", "echo", "ok"] in out["audit"]
    assert ["call", "add", "ok"] in out["audit"]
