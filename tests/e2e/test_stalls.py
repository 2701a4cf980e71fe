"""No backend can stall troupe: real misbehaving servers, each with `timeout: 3`, against a real troupe."""
from __future__ import annotations

import signal
import time
from pathlib import Path

import orjson
import requests

from actors.events.bus import HISTORY_BYTES
from actors.events.kinds import LOG_DATA_HISTORY_BYTES
from tests.e2e.test_metrics import McpHttp, scrape, value
from tests.e2e.conftest import error_text
from tests.support import wait_until
from tests.support.troupe import Troupe, TroupeHttp, children_of, pid_alive, server, text_of, write_config

TIMEOUT = 3  # every server's request timeout here
FAST_RESTART = {"min_backoff": 0.05, "max_backoff": 0.2}
BIG_ARGUMENT = 1024 * 1024  # far more than a pipe holds: a server that does not read blocks the write
FLOOD_LINES_PER_SEC = 50_000
FLOOD_WINDOW = 3.0  # seconds of calls made while the flood runs
FAST_CALL = 1.0  # the bound on a typical (median) call to a healthy server, whatever the others do
# The bound on the slowest one: a starved call waits for the whole flood (many seconds) or its
# timeout; a busy 2-core CI machine alone can push one call past FAST_CALL.
STARVED = 3.0
LOG_BUDGET_BYTES = 1024 * 1024  # troupe's own stderr over the flood window
RSS_GROWTH_BYTES = 60 * 1024 * 1024


def srv(name: str, module: str, *args: str, **extra) -> dict:
    return server(name, module, *args, timeout=TIMEOUT, restart=FAST_RESTART, **extra)




def _answered(t: Troupe, rid) -> bool:
    return any(r.get("id") == rid and "method" not in r for r in t.received)


def _timed_call(t: Troupe, name: str, text: str) -> float:
    started = time.monotonic()
    assert text_of(t.call(name, {"text": text}, timeout=10)) == text
    return time.monotonic() - started


def _events(t: Troupe) -> list[dict]:
    return orjson.loads(text_of(t.call("core_events", {"limit": 500})))["events"]


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


# ------------------------------------------------------------------ a backend that stops reading stdin

def test_backend_that_stops_reading_stdin_fails_its_calls_and_is_restarted_as_hung(make):
    t = make([srv("deaf", "tests.servers.no_stdin"), srv("echo", "tests.servers.echo")])
    first = t.server_status("deaf")["pid"]
    grandchild = int(text_of(t.call("deaf__grandchild_pid")))
    assert text_of(t.call("deaf__stop_reading")) == "no longer reading stdin"
    started = time.monotonic()
    big = t.send_request("tools/call", {"name": "deaf__echo", "arguments": {"text": "x" * BIG_ARGUMENT}})
    # troupe's write to it is stuck; the other server answers fast all along
    latencies = []
    while not _answered(t, big) and time.monotonic() - started < TIMEOUT + 5:
        latencies.append(_timed_call(t, "echo__echo", str(len(latencies))))
    text = error_text(t.wait_response(big, timeout=1))
    failed_after = time.monotonic() - started
    print(f"stdin stall: call failed after {failed_after:.2f}s ({text!r}); echo max "
          f"{max(latencies) * 1000:.1f} ms over {len(latencies)} calls meanwhile")
    assert failed_after < TIMEOUT + 2
    assert "deaf" in text and ("stdin" in text or "not read its input" in text), text
    assert len(latencies) >= 10 and sorted(latencies)[len(latencies) // 2] < FAST_CALL, latencies
    assert max(latencies) < STARVED, latencies
    # counted as hung, restarted, its whole group killed
    wait_until(lambda: (s := t.server_status("deaf"))["state"] == "ready" and s["pid"] != first, 20,
               message="deaf restarted")
    wait_until(lambda: not pid_alive(first) and not pid_alive(grandchild), 10, message="old group gone")
    assert any(e["type"] == "ServerStateChanged" and "stopped reading its stdin" in e.get("reason", "")
               for e in _events(t))
    assert text_of(t.call("deaf__echo", {"text": "back"})) == "back"
    assert len(children_of(t.proc.pid)) == 3  # deaf and its grandchild, echo: nothing older


def test_sigterm_ends_troupe_within_5s_while_a_backend_is_not_reading(make):
    t = make([srv("deaf", "tests.servers.no_stdin"), srv("echo", "tests.servers.echo")])
    kids = children_of(t.proc.pid)
    assert len(kids) == 3  # deaf, its grandchild, echo
    assert text_of(t.call("deaf__stop_reading")) == "no longer reading stdin"
    t.send_request("tools/call", {"name": "deaf__echo", "arguments": {"text": "x" * BIG_ARGUMENT}})
    wait_until(lambda: t.server_status("deaf")["in_flight"] == 1, 5, message="stuck write in flight")
    started = time.monotonic()
    t.proc.send_signal(signal.SIGTERM)
    t.proc.wait(timeout=10)
    print(f"stdin stall: SIGTERM to exit {time.monotonic() - started:.2f}s")
    assert time.monotonic() - started < 5
    assert t.proc.returncode == 0
    wait_until(lambda: not any(pid_alive(k) for k in kids), 5, message="no orphan")


# ------------------------------------------------------------------ non-JSON flood on stdout

def test_garbage_flood_is_counted_logged_sparingly_and_starves_nobody(make):
    t = make([srv("flood", "tests.servers.garbage", "--flood", str(FLOOD_LINES_PER_SEC)),
              srv("echo", "tests.servers.echo")])
    wait_until(lambda: t.server_status("flood")["garbage_lines"] > FLOOD_LINES_PER_SEC // 2, 10,
               message="flood under way")
    log_before = sum(map(len, t.stderr))
    counted_before = t.server_status("flood")["garbage_lines"]
    started = time.monotonic()
    latencies = []
    while len(latencies) < 20 or time.monotonic() - started < FLOOD_WINDOW:
        latencies.append(_timed_call(t, "echo__echo", str(len(latencies))))
    flooder = _timed_call(t, "flood__echo", "heard through the flood")
    window = time.monotonic() - started
    status = t.server_status("flood")
    rate = (status["garbage_lines"] - counted_before) / window
    logged = sum(map(len, t.stderr)) - log_before
    p50 = sorted(latencies)[len(latencies) // 2]
    print(f"flood: {rate:.0f} junk lines/s counted; echo call p50 {p50 * 1000:.1f} ms,"
          f" max {max(latencies) * 1000:.1f} ms over {len(latencies)} calls; flooder's own call "
          f"{flooder * 1000:.1f} ms; troupe logged {logged} bytes in {window:.1f}s")
    assert p50 < FAST_CALL and max(latencies) < STARVED, latencies
    assert flooder < STARVED
    assert rate > FLOOD_LINES_PER_SEC / 5  # troupe reads and counts them, it does not fall behind for good
    assert status["state"] == "ready" and status["restarts"] == 0
    assert logged < LOG_BUDGET_BYTES
    assert any("more not logged" in line for line in t.stderr)


# ------------------------------------------------------------------ big log notifications

def test_big_log_payloads_leave_a_bounded_history_and_memory(make):
    t = make([srv("chatty", "tests.servers.log_flood")])
    assert text_of(t.call("chatty__echo", {"text": "warm"})) == "warm"
    before = _rss(t.proc.pid)
    assert text_of(t.call("chatty__flood_logs", {"count": 300, "mb": 1})) == "started 300"

    def last_logged():
        logs = [e for e in _events(t) if e["type"] == "ServerLogged"]
        return logs if logs and str(logs[-1]["data"]).startswith("000299") else None
    logs = wait_until(last_logged, 60, interval=0.2, message="the 300th log event")
    growth = _rss(t.proc.pid) - before
    replay = text_of(t.call("core_events", {"limit": 500}))
    print(f"log flood: RSS grew {growth / 2**20:.1f} MiB; history replays {len(replay)} bytes, "
          f"{len(logs)} log events")
    assert growth < RSS_GROWTH_BYTES
    assert len(replay) <= HISTORY_BYTES * 1.05
    assert all(len(str(e["data"]).encode()) < LOG_DATA_HISTORY_BYTES + 100 for e in logs)
    assert "truncated by troupe: 1048576 bytes" in str(logs[-1]["data"])
    assert t.server_status("chatty")["state"] == "ready"


# ------------------------------------------------------------------ unusable ids

def test_replies_with_invalid_ids_are_dropped_and_counted(make):
    t = make([srv("odd", "tests.servers.bad_ids")])
    pid = t.server_status("odd")["pid"]
    for i in range(3):
        assert text_of(t.call("odd__echo", {"text": str(i)})) == str(i)
    status = t.server_status("odd")
    # per call: replies with a list, an object and true as id, and a ping request with a list id
    assert status["bad_ids"] == 3 * 4
    assert status["state"] == "ready" and status["restarts"] == 0 and status["pid"] == pid


def test_dropped_messages_show_in_metrics(tmp_path):
    t = TroupeHttp(write_config(tmp_path, [srv("junk", "tests.servers.garbage"), srv("odd", "tests.servers.bad_ids")],
                                mode="flat", json_response=True))
    try:
        wait_until(lambda: requests.get(t.base + "/status", timeout=5).json()["ready"], 20, message="ready")
        client = McpHttp(t.url)
        assert client.call("odd__echo", {"text": "x"})["result"]["content"][0]["text"] == "x"
        assert client.call("junk__echo", {"text": "y"})["result"]["content"][0]["text"] == "y"
        client.close()
        m = scrape(t.base)
        assert value(m, "troupe_server_bad_ids_total", server="odd") == 4
        assert value(m, "troupe_server_bad_ids_total", server="junk") == 0
        assert value(m, "troupe_server_garbage_lines_total", server="junk") > 0
    finally:
        assert t.stop() == 0


# ------------------------------------------------------------------ a wedged server

def test_wedged_server_is_restarted_after_timeouts_in_a_row_and_a_failed_ping(make):
    t = make([server("wedgy", "tests.servers.wedge", timeout=TIMEOUT, restart={"hung_after": 3, **FAST_RESTART})])
    first = t.server_status("wedgy")["pid"]
    started = time.monotonic()
    rids = [t.send_request("tools/call", {"name": "wedgy__wedge", "arguments": {}})]
    rids += [t.send_request("tools/call", {"name": "wedgy__echo", "arguments": {"text": str(i)}}) for i in range(2)]
    for rid in rids:
        assert "did not answer" in error_text(t.wait_response(rid, timeout=TIMEOUT + 5))
    wait_until(lambda: (s := t.server_status("wedgy"))["state"] == "ready" and s["pid"] != first, 20,
               message="wedgy restarted")
    print(f"wedge: restarted {time.monotonic() - started:.1f}s after the first call")
    wait_until(lambda: not pid_alive(first), 10, message="wedged process gone")
    assert any(e["type"] == "ServerStateChanged" and "ping got no answer" in e.get("reason", "")
               for e in _events(t))
    assert text_of(t.call("wedgy__echo", {"text": "back"})) == "back"


def test_slow_tool_alone_does_not_restart_a_server_that_answers_ping(make):
    t = make([srv("slow", "tests.servers.wedge")])
    pid = t.server_status("slow")["pid"]
    rids = [t.send_request("tools/call", {"name": "slow__hang", "arguments": {}}) for _ in range(3)]
    for rid in rids:
        assert "did not answer" in error_text(t.wait_response(rid, timeout=TIMEOUT + 5))
    wait_until(lambda: any("slow, not hung" in line for line in t.stderr), TIMEOUT + 2, message="ping answered")
    assert t.server_status("slow")["pid"] == pid and t.server_status("slow")["restarts"] == 0
    assert text_of(t.call("slow__echo", {"text": "still here"})) == "still here"
