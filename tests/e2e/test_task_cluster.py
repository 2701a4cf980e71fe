"""Tasks across a cluster: three troupes on one real Redis, raw 2026-07-28 requests to each one's
HTTP front. A task troupe mints on one instance is answered by tasks/get on the others, working
and then completed with its result; when the instance running a task is killed, the others answer
it as failed, naming that instance, within its lease; a forged task id is refused everywhere; a
cancel sent to an instance that does not run the task is refused saying which one does."""
from __future__ import annotations

import itertools
import json

import pytest
import requests
import yaml

from tests.support import wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # three troupes, a redis-server and a killed instance
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
LEASE_S = 2
_ids = itertools.count(1)


@pytest.fixture
def redis(tmp_path):
    r = RedisServer(tmp_path).start()
    yield r
    r.stop()


def _rpc(t: TroupeHttp, method: str, params: dict) -> dict:
    """One stateless modern request; its JSON-RPC response (a JSON body or the last SSE message)."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    headers["Mcp-Name"] = params["name"] if method == "tools/call" else params["taskId"]
    body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": {**params, "_meta": META}}
    resp = requests.post(t.url, json=body, headers=headers, timeout=20)
    assert resp.status_code == 200 or resp.status_code == 400 and "error" in resp.json(), resp.text[:300]
    if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
        data = [line[6:] for line in resp.text.splitlines() if line.startswith("data: ")]
        return json.loads(data[-1])
    return resp.json()


def _task(t: TroupeHttp, task_id: str) -> dict:
    return _rpc(t, "tasks/get", {"taskId": task_id})


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _ready(troupes: list[TroupeHttp]) -> bool:
    statuses = [_status(t) for t in troupes]
    return all(s["cluster"].get("joined") and len(s["cluster"].get("instances") or []) == len(troupes)
               and any(v["name"] == "echo" and v["state"] == "ready" for v in s["servers"]) for s in statuses)


def test_a_task_is_answered_by_every_instance_and_fails_when_its_instance_dies(tmp_path, redis):
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", placement="replicated")], mode="flat",
                          json_response=True, tasks={"mint_after": 0})
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": LEASE_S}}))
    troupes = [TroupeHttp(config, env={"TROUPE_CONFIG_DIR": str(tmp_path / f"conf{i}")}) for i in range(3)]
    try:
        wait_until(lambda: _ready(troupes), 30, interval=0.2, message="three instances joined, echo ready")
        a, b, c = troupes
        instance_a = _status(a)["cluster"]["instance"]

        # a task minted on A: B and C see it at once (it was in Redis before A handed out its id)
        created = _rpc(a, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 2}})["result"]
        assert created["resultType"] == "task" and created["status"] == "working", created
        task_id = created["taskId"]
        for other in (b, c):
            seen = _task(other, task_id)["result"]
            assert seen["taskId"] == task_id and seen["status"] == "working", seen
        done = wait_until(lambda: (r := _task(b, task_id)["result"])["status"] == "completed" and r, 20,
                          interval=0.2, message="B to see A's task completed")
        assert done["result"]["content"][0]["text"] == "slept"
        assert _task(c, task_id)["result"]["result"] == done["result"]

        # a forged id: refused on B as unknown, never read from Redis
        forged = task_id[:-4] + ("AAAA" if not task_id.endswith("AAAA") else "BBBB")
        refused = _task(b, forged)
        assert refused["error"]["code"] == -32602 and "unknown task" in refused["error"]["message"]

        # a long task on A; cancelling it on B is refused naming A; A killed: B answers it failed
        long_id = _rpc(a, "tools/call", {"name": "echo__sleep", "arguments": {"seconds": 60}})["result"]["taskId"]
        assert _task(b, long_id)["result"]["status"] == "working"
        cancel = _rpc(b, "tasks/cancel", {"taskId": long_id})
        assert cancel["error"]["code"] == -32602 and instance_a in cancel["error"]["message"], cancel
        a.proc.kill()
        a.proc.wait(10)

        def failed() -> dict | None:
            task = _task(b, long_id)["result"]
            return task if task["status"] == "failed" else None
        lost = wait_until(failed, LEASE_S * 3 + 5, interval=0.2, message="B to answer the task of dead A as failed")
        assert lost["error"] == {"code": -32603,
                                 "message": f"troupe instance {instance_a} that ran this task stopped; "
                                            "its result is lost"}
        assert _task(c, long_id)["result"]["error"] == lost["error"]  # written back: C reads the same verdict
        assert _task(c, task_id)["result"]["status"] == "completed"  # a finished task outlives its runner
    finally:
        for t in troupes:
            t.stop()
