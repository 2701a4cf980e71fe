"""No stall over 100 ms for others: while one client makes troupe list 50,000 tools with a 5 MB
description, search them, and send batches (10,000 requests: refused; 100: served), another
client's calls, one every 100 ms, stay fast. Real troupe, real servers, over HTTP."""
from __future__ import annotations

import itertools
import threading
import time

import orjson
import pytest
import requests

from tests.support import wait_until
from tests.support.troupe import TroupeHttp, server, write_config

SYNTHETIC, HUGE_MB = 50_000, 5
CALL_EVERY = 0.1
WARM_UP_CALLS = 5  # the calm client's first calls (its session, the first call's imports) are not measured
WORST_CALL = 0.150  # the bound on another client's call
# With max_tools raised to take all 50,000, the catalogue itself is five times the default
# limit: the cycle collector's full passes over it take 100-250 ms on a loaded 2-core machine,
# which no slicing can cut. Still a tenth of today's 3.5 s stall.
WORST_CALL_RAISED = 0.500
# A shared 2-core machine (load 17 was seen) can take the cores from troupe for one call's length
# whatever troupe does: the slowest call may go past the bound, up to this many times it, and
# every other must keep within it. A stall of troupe's own (3.5 s before, on several calls) fails.
ONE_SLOW_CALL_FACTOR = 4
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
# A timing test of 50,000 tools (~17 s): beside the other suites that --quick runs in parallel on
# 2 cores, the machine, not troupe, decides its latencies (a 30 s busy window was seen there).
pytestmark = pytest.mark.slow


class Client:
    """A Streamable HTTP client of troupe (json_response) at one protocol version."""

    def __init__(self, url: str, version: str = "2025-06-18") -> None:
        self.url, self.http, self.ids = url, requests.Session(), itertools.count(1)
        self.headers = dict(HEADERS)
        answer = self.http.post(url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "stall-test", "version": "1"}}},
            headers=self.headers, timeout=30)
        self.headers.update({"Mcp-Session-Id": answer.headers["Mcp-Session-Id"], "MCP-Protocol-Version": version})
        self.http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers,
                       timeout=30)

    def post(self, body, timeout: float = 120) -> requests.Response:
        return self.http.post(self.url, data=orjson.dumps(body), headers=self.headers, timeout=timeout)

    def tool(self, name: str, arguments: dict | None = None) -> dict:
        return self.post({"jsonrpc": "2.0", "id": next(self.ids), "method": "tools/call",
                          "params": {"name": name, "arguments": arguments or {}}}).json()

    def call(self, name: str, arguments: dict | None = None) -> dict:
        return self.tool("call_tool", {"name": name, "arguments": arguments or {}})


class Ticker:
    """Calls calm__echo every CALL_EVERY on its own session and thread; keeps each call's latency."""

    def __init__(self, url: str) -> None:
        self.client, self.latencies, self.errors = Client(url), [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            answer = self.client.call("calm__echo", {"text": "tick"})
            self.latencies.append(time.monotonic() - started)
            if answer.get("result", {}).get("content", [{}])[0].get("text") != "tick":
                self.errors.append(answer)
            self._stop.wait(CALL_EVERY)

    def stop(self) -> list[float]:
        self._stop.set()
        self._thread.join(timeout=30)
        return self.latencies[WARM_UP_CALLS:]


def _batch(method: str, n: int) -> list:
    if method == "core_status":
        return [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "core_status", "arguments": {}}}
                for i in range(n)]
    return [{"jsonrpc": "2.0", "id": i, "method": method} for i in range(n)]


def _listed(client: Client) -> int:
    """How many tools the catalogue serves (list_tools' total, calm's included, troupe's own not)."""
    def total(tool: str) -> int:
        return orjson.loads(client.tool(tool, {"limit": 1} if tool == "list_tools" else {})[
            "result"]["content"][0]["text"])["total"]
    return total("list_tools") - total("list_core_tools")


def _big(base: str) -> dict:
    return next(s for s in requests.get(base + "/status", timeout=30).json()["servers"] if s["name"] == "big")


@pytest.mark.parametrize("max_tools", [None, 60_000], ids=["default_max_tools", "max_tools_raised"])
def test_a_huge_listing_and_big_batches_do_not_stall_another_client(tmp_path, max_tools):
    extra = {"max_tools": max_tools} if max_tools else {}
    # pin: false: the tools are shown at once (a pinned server's tools added later wait for approval)
    t = TroupeHttp(write_config(tmp_path, [server("calm", "tests.servers.echo"),
                                           server("big", "tests.servers.many_tools", pin=False, **extra)],
                                mode="meta", json_response=True), env={"TROUPE_CONFIG_DIR": str(tmp_path)})
    try:
        wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["ready"], 30, message="ready")
        other, batcher = Client(t.url), Client(t.url, "2025-03-26")
        ticker = Ticker(t.url)
        wait_until(lambda: len(ticker.latencies) > WARM_UP_CALLS, 20, message="the calm client warmed up")
        started = time.monotonic()
        assert "listing 50000" in other.call("big__inflate", {"synthetic": SYNTHETIC, "huge_mb": HUGE_MB})[
            "result"]["content"][0]["text"]
        expected = 10_000 if max_tools is None else SYNTHETIC + 7  # + echo's 7 tools, inflate among them
        wait_until(lambda: _listed(other) >= expected + 6, 60, interval=0.1, message="the big listing in the catalogue")
        found = orjson.loads(other.tool("filter_tools", {"query": "alpha bravo charlie", "limit": 5})[
            "result"]["content"][0]["text"])
        refused = batcher.post(_batch("core_status", 10_000))
        statuses = batcher.post(_batch("core_status", 100)).json()
        lists = batcher.post(_batch("tools/list", 100)).json()
        busy = time.monotonic() - started
        served = _listed(other)
        wait_until(lambda: len(ticker.latencies) >= WARM_UP_CALLS + 10, 20, message="ten measured calls")
        latencies = ticker.stop()
        note = " ".join(_big(t.base)["notes"])
    finally:
        t.stop()
    worst, p50 = max(latencies), sorted(latencies)[len(latencies) // 2]
    print(f"stalls ({'max_tools ' + str(max_tools) if max_tools else 'default max_tools'}): {served} tools "
          f"served; the other client's calls over {busy:.1f}s: p50 {p50 * 1000:.1f} ms, worst {worst * 1000:.1f} ms "
          f"({len(latencies)} calls)")
    assert not ticker.errors, ticker.errors[:3]
    assert found["total"] > 0 and found["tools"][0]["name"].startswith("big__s"), found
    assert served == expected + 6  # calm's 6 tools beside big's
    if max_tools is None:
        assert "max_tools" in note and "40008 refused" in note, note  # 50,008 listed, the first 10,000 kept
    else:
        assert "'huge'" in note and "max_tool_bytes" in note, note  # 5 MB is over the 64 KiB default
    answer = refused.json()
    assert isinstance(answer, dict) and answer["error"]["code"] == -32600 and "max_batch" in answer["error"]["message"]
    assert isinstance(statuses, list) and len(statuses) == 100 and all("result" in a for a in statuses)
    assert isinstance(lists, list) and len(lists) == 100 and all("tools" in a["result"] for a in lists)
    assert len(latencies) >= 10, latencies  # calls went on all along
    bound = WORST_CALL if max_tools is None else WORST_CALL_RAISED
    second = sorted(latencies)[-2]
    assert second < bound and worst < bound * ONE_SLOW_CALL_FACTOR, sorted(latencies)[-5:]
