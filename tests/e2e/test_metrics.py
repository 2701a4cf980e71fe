"""GET /metrics parsed as Prometheus text; counters checked against the calls made."""
from __future__ import annotations

import itertools
import os
import signal
import threading

import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support import wait_until
from tests.support.troupe import TroupeHttp, server, write_config

PROTOCOL = "2025-11-25"


class McpHttp:
    """A minimal Streamable HTTP client (troupe serving with json_response: plain JSON replies)."""

    def __init__(self, url: str, headers: dict | None = None):
        self.url, self.http, self._ids = url, requests.Session(), itertools.count(1)
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                        **(headers or {})}
        init = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                           "clientInfo": {"name": "troupe-tests", "version": "1"}})
        assert "result" in init, init
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message: dict, timeout: float = 30) -> requests.Response:
        resp = self.http.post(self.url, json=message, headers=self.headers, timeout=timeout)
        if "Mcp-Session-Id" in resp.headers:
            self.headers.update({"Mcp-Session-Id": resp.headers["Mcp-Session-Id"], "MCP-Protocol-Version": PROTOCOL})
        return resp

    def request(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        return self.post({"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params or {}},
                         timeout).json()

    def call(self, tool: str, arguments: dict | None = None, timeout: float = 30) -> dict:
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}}, timeout)

    def close(self) -> None:
        self.http.close()


def scrape(base: str) -> dict:
    """{(sample name, frozenset(labels)): value} from one GET /metrics, checked as Prometheus text."""
    resp = requests.get(base + "/metrics", timeout=10)
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    out = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(metrics: dict, name: str, **labels) -> float:
    return metrics[(name, frozenset(labels.items()))]


@pytest.fixture
def troupe(tmp_path):
    started = []

    def make(servers, **serve):
        t = TroupeHttp(write_config(tmp_path, servers, mode="flat", json_response=True, **serve))
        started.append(t)
        return t
    yield make
    for t in started:
        assert t.stop() == 0


def test_metrics_count_the_calls_made(troupe):
    t = troupe([server("echo", "tests.servers.echo"),
                server("slow", "tests.servers.echo", "--name", "slow", timeout=0.5),
                server("broken", "tests.servers.crash_on_start")])
    wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["ready"], 20, message="ready")
    client = McpHttp(t.url)
    for i in range(7):
        assert client.call("echo__echo", {"text": str(i)})["result"]["content"][0]["text"] == str(i)
    assert client.call("echo__fail")["result"]["isError"] is True  # a tool error is still an answer
    timed_out = client.call("slow__sleep", {"seconds": 2})  # the server's timeout is 0.5 s
    assert "error" in timed_out or timed_out["result"].get("isError"), timed_out

    m = scrape(t.base)
    assert value(m, "troupe_server_calls_total", server="echo") == 8
    assert value(m, "troupe_server_errors_total", server="echo") == 0
    assert value(m, "troupe_server_calls_total", server="slow") == 1
    assert value(m, "troupe_server_errors_total", server="slow") == 1
    assert value(m, "troupe_server_timeouts_total", server="slow") == 1
    # The histogram agrees with the counters: cumulative buckets ending at +Inf == count == calls.
    buckets = sorted(((float(dict(labels)["le"]), v) for (name, labels), v in m.items()
                      if name == "troupe_server_call_duration_seconds_bucket" and ("server", "echo") in labels))
    assert len(buckets) == 15 and buckets[-1] == (float("inf"), 8)
    assert all(a[1] <= b[1] for a, b in zip(buckets, buckets[1:]))
    assert value(m, "troupe_server_call_duration_seconds_count", server="echo") == 8
    assert 0 < value(m, "troupe_server_call_duration_seconds_sum", server="echo") < 8
    assert value(m, "troupe_server_call_duration_seconds_sum", server="slow") >= 0.5
    assert value(m, "troupe_server_state", server="echo", state="ready") == 1
    assert value(m, "troupe_server_state", server="echo", state="failed") == 0
    assert value(m, "troupe_server_up", server="echo") == 1
    assert value(m, "troupe_server_up", server="broken") == 0
    assert value(m, "troupe_server_tools", server="echo") >= 5
    assert value(m, "troupe_server_restarts_total", server="broken") >= 1
    assert value(m, "troupe_ready") == 1 and value(m, "troupe_servers") == 3
    assert value(m, "process_resident_memory_bytes") > 10_000_000
    assert value(m, "process_open_fds") > 3
    assert ("troupe_discovery_cycles_total", frozenset()) not in m  # discovery is off: no series

    # In flight: a call sleeping upstream shows as 1 until it returns.
    done = threading.Event()
    threading.Thread(target=lambda: (McpHttp(t.url).call("echo__sleep", {"seconds": 1.5}), done.set()),
                     daemon=True).start()
    wait_until(lambda: value(scrape(t.base), "troupe_server_in_flight", server="echo") == 1, 10, interval=0.05,
               message="in-flight call in /metrics")
    assert done.wait(10)
    after = scrape(t.base)
    assert value(after, "troupe_server_in_flight", server="echo") == 0
    assert value(after, "troupe_server_calls_total", server="echo") == 9
    assert value(after, "troupe_server_call_duration_seconds_bucket", server="echo", le="1.0") == 8
    assert value(after, "troupe_server_call_duration_seconds_bucket", server="echo", le="2.5") == 9

    # A killed backend is restarted: the restart counter follows.
    pid = next(s["pid"] for s in requests.get(t.base + "/status", timeout=5).json()["servers"] if s["name"] == "echo")
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: value(scrape(t.base), "troupe_server_restarts_total", server="echo") == 1
               and value(scrape(t.base), "troupe_server_up", server="echo") == 1, 20, interval=0.1,
               message="restart counted and back up")
    client.close()


def test_metrics_need_the_token_and_show_discovery(tmp_path):
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    project.mkdir()
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {"found": {"command": "true"}}}')
    path = tmp_path / "troupe.yaml"
    path.write_text(yaml.safe_dump({"servers": [], "serve": {"auth_token": "metrics-s3cret"}, "discovery": {
        "enabled": True, "home": str(home), "project_root": str(project), "path_probe": {"enabled": False},
        "auto_connect": {"client_configs": False}, "health": {"enabled": False}}}))
    t = TroupeHttp(path)
    try:
        assert requests.get(t.base + "/metrics", timeout=10).status_code == 401
        auth = {"Authorization": "Bearer metrics-s3cret"}

        def scraped():
            resp = requests.get(t.base + "/metrics", headers=auth, timeout=10)
            assert resp.status_code == 200
            return {(s.name, frozenset(s.labels.items())): s.value
                    for f in text_string_to_metric_families(resp.text) for s in f.samples}
        m = wait_until(lambda: (m := scraped()).get(("troupe_discovery_cycles_total", frozenset()), 0) >= 1 and m,
                       20, interval=0.1, message="a discovery cycle in /metrics")
        assert value(m, "troupe_discovery_services") >= 1
        assert value(m, "troupe_discovery_provider_records", provider="cursor") >= 1
        assert {value(m, "troupe_health_services", health=h) for h in ("healthy", "unhealthy", "unknown")}
        assert value(m, "process_open_fds") > 3
        assert "metrics-s3cret" not in "".join(t.stderr)
    finally:
        assert t.stop() == 0
