"""A tool change on a `single` server reaches clients of every instance of a cluster: a modern
listen stream on one that does not run the server, and a legacy session's GET stream on
another, both hear tools/list_changed, and their lists then show the new tool."""
from __future__ import annotations

import json
import threading

import pytest
import requests
import yaml

from tests.e2e.test_metrics import McpHttp
from tests.support import wait_until
from tests.support.redis import RedisServer
from tests.support.troupe import TroupeHttp, server, write_config

pytestmark = pytest.mark.slow  # three troupes and a redis-server
MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
CHANGED = "notifications/tools/list_changed"


class _Stream:
    """An SSE response read on a thread; every JSON-RPC message it carries is kept, in order."""

    def __init__(self, resp: requests.Response) -> None:
        assert resp.status_code == 200, resp.text[:300]
        self.resp, self.messages = resp, []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for line in self.resp.iter_lines(decode_unicode=True):
                if line and line.startswith("data: "):
                    self.messages.append(json.loads(line[6:]))
        except (requests.RequestException, ValueError, AttributeError):
            pass  # closed by the test (urllib3 drops its file object under the reader)

    def methods(self) -> list:
        return [m.get("method") for m in self.messages]

    def close(self) -> None:
        self.resp.close()


def _status(t: TroupeHttp) -> dict:
    return requests.get(t.base + "/status", timeout=10).json()


def _listen(t: TroupeHttp) -> _Stream:
    body = {"jsonrpc": "2.0", "id": "L", "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
    headers = {"Accept": "text/event-stream, application/json", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen"}
    return _Stream(requests.post(t.url, json=body, headers=headers, stream=True, timeout=30))


def _get_stream(client: McpHttp) -> _Stream:
    headers = {k: v for k, v in client.headers.items() if k != "Content-Type"}
    return _Stream(client.http.get(client.url, headers={**headers, "Accept": "text/event-stream"}, stream=True,
                                   timeout=30))


def test_a_tool_change_reaches_a_listen_stream_and_a_get_stream_on_other_instances(tmp_path):
    redis = RedisServer(tmp_path).start()
    config = write_config(tmp_path, [server("echo", "tests.servers.echo", pin=False)], mode="flat",
                          json_response=True)
    config.write_text(config.read_text() + yaml.safe_dump({"cluster": {"redis": redis.url, "lease": 5}}))
    troupes = [TroupeHttp(config) for _ in range(3)]
    streams: list[_Stream] = []
    try:
        wait_until(lambda: all(s["state"] == "ready" for t in troupes for s in _status(t)["servers"]), 30,
                   message="echo ready everywhere")
        owner = next(t for t in troupes if "echo" in _status(t)["cluster"]["owned"])
        listener, getter = [t for t in troupes if t is not owner]
        streams.append(_listen(listener))
        legacy = McpHttp(getter.url)
        # its list, before the change (a session that never listed has nothing to refresh)
        assert "echo__late_tool" not in {tool["name"] for tool in legacy.request("tools/list")["result"]["tools"]}
        streams.append(_get_stream(legacy))
        wait_until(lambda: "notifications/subscriptions/acknowledged" in streams[0].methods(), 10,
                   message="listen acknowledged")
        assert McpHttp(owner.url).call("echo__notify_change")["result"]["content"][0]["text"] == "changed"
        wait_until(lambda: CHANGED in streams[0].methods() and CHANGED in streams[1].methods(), 20,
                   message="list_changed on both other instances")
        names = {tool["name"] for tool in legacy.request("tools/list")["result"]["tools"]}
        assert "echo__late_tool" in names, [s for t in troupes for s in _status(t)["servers"]]
        legacy.close()
    finally:
        for s in streams:
            s.close()
        for t in troupes:
            t.stop()
        redis.stop()
