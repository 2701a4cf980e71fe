"""Misbehaving backends: every request gets exactly one answer, nothing hangs or leaks."""
from __future__ import annotations

import os
import time

import pytest

from tests.e2e.conftest import error_text
from tests.support import wait_until
from tests.support.troupe import Troupe, children_of, pid_alive, server, text_of, write_config

FAST_RESTART = {"min_backoff": 0.05, "max_backoff": 0.2}


@pytest.fixture
def make(make):
    """client_admin: these tests restart servers through core_service_restart."""
    def start(servers, *args, **serve):
        return make(servers, *args, **{"client_admin": True, **serve})
    return start


def test_hung_backend_times_out_cancels_upstream_and_keeps_serving(make):
    t = make([server("hang", "tests.servers.hang", timeout=1)])
    started = time.monotonic()
    text = error_text(t.call("hang__hang", timeout=10))
    assert time.monotonic() - started < 5
    assert "hang" in text and "1s" in text
    # troupe told the backend it gave up (the backend logs the cancel to its stderr)
    wait_until(lambda: any("cancelled" in line for line in t.stderr), 5, message="cancel seen by backend")
    assert text_of(t.call("hang__echo", {"text": "alive"})) == "alive"


def test_late_reply_is_dropped_not_given_to_the_next_caller(make):
    t = make([server("echo", "tests.servers.echo", timeout=1)])
    assert error_text(t.call("echo__sleep", {"seconds": 1.5}, timeout=10))
    # the late "slept" reply arrives while these run; each caller gets its own answer
    answers = [text_of(t.call("echo__echo", {"text": f"n{i}"})) for i in range(10)]
    assert answers == [f"n{i}" for i in range(10)]
    assert not any(r.get("result", {}).get("content", [{}])[0].get("text") == "slept" for r in t.received)


def test_garbage_on_stdout_does_not_break_the_link(make):
    t = make([server("junk", "tests.servers.garbage")])
    for i in range(5):
        assert text_of(t.call("junk__echo", {"text": str(i)})) == str(i)
    assert t.server_status("junk")["state"] == "ready"


def test_huge_lines_pass_or_fail_fast_by_the_size_limit(make):
    t = make([server("big", "tests.servers.huge_line", "--mb", "10"),
              server("small", "tests.servers.huge_line", "--mb", "10", max_message_bytes=1_000_000)])
    ok = t.call("big__huge", timeout=60)["result"]
    assert not ok.get("isError") and len(ok["content"][0]["text"]) > 9_000_000
    started = time.monotonic()
    refused = error_text(t.call("small__huge", timeout=30))
    assert "small" in refused and "over" in refused
    assert time.monotonic() - started < 10  # failed as soon as the line was seen, not by timeout
    assert text_of(t.call("small__echo", {"text": "fine"})) == "fine"


def test_stderr_flood_is_drained(make):
    t = make([server("loud", "tests.servers.stderr_flood", "--mb", "4")])
    for i in range(3):
        assert text_of(t.call("loud__echo", {"text": str(i)}, timeout=30)) == str(i)


def test_exit_during_initialize_backs_off_and_calls_fail_at_once(make):
    t = make([server("dies", "tests.servers.exit_during_init", restart=FAST_RESTART),
              server("echo", "tests.servers.echo")])
    wait_until(lambda: t.server_status("dies")["restarts"] >= 1, 10, message="restarts")
    assert text_of(t.call("echo__echo", {"text": "ok"})) == "ok"
    state = t.server_status("dies")
    assert state["state"] in ("backoff", "starting", "failed")
    # it never listed tools, so there is nothing to call; the status says why it is down
    assert state["state"] == "starting" or "initialize" in (state["last_error"] or "") or \
        "exited" in (state["last_error"] or "")


def test_crash_loop_opens_the_circuit_and_manual_restart_closes_it(make):
    t = make([server("crashy", "tests.servers.crash_on_start",
                     restart={"intensity": 2, "period": 60, **FAST_RESTART}),
              server("echo", "tests.servers.echo")])
    wait_until(lambda: t.server_status("crashy")["state"] == "failed", 15, message="circuit open")
    status = t.server_status("crashy")
    assert "circuit open" in status["last_error"]
    events = t.call("core_events", {"limit": 200})
    assert "CircuitOpened" in text_of(events)
    unknown = t.call("core_service_restart", {"name": "no-such-server"})["result"]
    assert unknown["isError"] and "no-such-server" in unknown["content"][0]["text"]
    restarted = t.call("core_service_restart", {"name": "crashy"})["result"]
    assert not restarted.get("isError")
    wait_until(lambda: t.server_status("crashy")["state"] in ("backoff", "failed"), 10, message="retried")
    assert text_of(t.call("echo__echo", {"text": "unaffected"})) == "unaffected"


def test_crash_mid_call_answers_fast_and_recovers(make):
    t = make([server("flaky", "tests.servers.crash_after", "--calls", "2", restart=FAST_RESTART)])
    assert text_of(t.call("flaky__echo", {"text": "one"})) == "one"
    started = time.monotonic()
    text = error_text(t.call("flaky__echo", {"text": "two"}))
    assert time.monotonic() - started < 5 and "flaky" in text
    wait_until(lambda: t.server_status("flaky")["state"] == "ready", 15, message="flaky back")
    assert text_of(t.call("flaky__echo", {"text": "three"})) == "three"


def test_calls_beyond_max_in_flight_wait_their_turn_and_only_a_full_queue_is_busy(make):
    t = make([server("echo", "tests.servers.echo", max_in_flight=2, max_queued=2, timeout=10)])
    slow = [t.send_request("tools/call", {"name": "echo__sleep", "arguments": {"seconds": 3}}) for _ in range(2)]
    wait_until(lambda: t.server_status("echo")["in_flight"] == 2, 10, message="two in flight")
    waiting = [t.send_request("tools/call", {"name": "echo__echo", "arguments": {"text": f"w{i}"}}) for i in range(2)]
    wait_until(lambda: t.server_status("echo")["queued"] == 2, 10, message="two waiting")
    busy = error_text(t.call("echo__echo", {"text": "x"}, timeout=5))
    assert "busy" in busy and "max_queued" in busy
    for rid in slow:
        assert text_of(t.wait_response(rid)) == "slept"
    # the waiting calls go, in order, as the slow ones free their slots
    assert [text_of(t.wait_response(rid)) for rid in waiting] == ["w0", "w1"]
    assert t.server_status("echo")["queued"] == 0


def test_a_call_waiting_for_a_slot_is_still_bounded_by_its_timeout(make):
    t = make([server("echo", "tests.servers.echo", max_in_flight=1, timeout=2)])
    sent = {}

    def send(name, arguments):
        rid = t.send_request("tools/call", {"name": name, "arguments": arguments})
        sent[rid] = time.monotonic()
        return rid
    first = send("echo__sleep", {"seconds": 10})
    wait_until(lambda: t.server_status("echo")["in_flight"] == 1, 10, message="one in flight")
    second = send("echo__sleep", {"seconds": 10})
    third = send("echo__echo", {"text": "x"})
    # waiting counts against a call's timeout: each is answered within it, queued or sent
    answers = {rid: t.wait_response(rid, timeout=10) for rid in (first, second, third)}
    took = {rid: time.monotonic() - sent[rid] for rid in answers}
    assert "did not answer" in error_text(answers[first]) and took[first] < 2 + 1.5
    assert answers[second]["result"]["isError"] and took[second] < 2 + 1.5
    # the third got the slot in time, was told it never came, or ran out of time once sent:
    # whichever, it was answered within its own timeout
    third_text = text_of(answers[third]) if "result" in answers[third] and not answers[third]["result"].get("isError") \
        else error_text(answers[third])
    assert third_text == "x" or "no free slot within 2s" in third_text or "did not answer" in third_text, third_text
    assert took[third] < 2 + 1.5
    assert t.server_status("echo")["queued"] == 0


def test_slow_start_is_waited_for_by_the_first_list(make, tmp_path):
    t = Troupe(write_config(tmp_path, [server("slow", "tests.servers.slow_start", "--delay", "2")], mode="flat"))
    try:
        t.initialize()
        tools = {tool["name"] for tool in t.request("tools/list", timeout=30)["result"]["tools"]}
        assert "slow__echo" in tools
    finally:
        t.close()


def test_sigterm_ignoring_backend_and_grandchild_are_killed_on_restart(make):
    t = make([server("stubborn", "tests.servers.ignore_sigterm")])
    first = t.server_status("stubborn")["pid"]
    grandchild = int(text_of(t.call("stubborn__grandchild_pid")))
    fds_before = len(os.listdir(f"/proc/{t.proc.pid}/fd"))
    for _ in range(3):
        pid = t.server_status("stubborn")["pid"]
        assert t.call("core_service_restart", {"name": "stubborn"})["result"].get("isError") is None
        wait_until(lambda pid=pid: t.server_status("stubborn")["state"] == "ready" and
                   t.server_status("stubborn")["pid"] != pid, 15, message="restarted")
    wait_until(lambda: not pid_alive(first) and not pid_alive(grandchild), 10, message="old group gone")
    fds_after = len(os.listdir(f"/proc/{t.proc.pid}/fd"))
    assert fds_after <= fds_before + 2, (fds_before, fds_after)  # no descriptors leak per restart
    assert len(children_of(t.proc.pid)) == 2  # the live server and its grandchild, nothing older


def test_client_gone_mid_call_cancels_upstream(make):
    t = make([server("hang", "tests.servers.hang")])
    t.send_request("tools/call", {"name": "hang__hang", "arguments": {}})
    wait_until(lambda: t.server_status("hang")["in_flight"] == 1, 10, message="in flight")
    kids = children_of(t.proc.pid)
    assert t.close(timeout=10) == 0
    wait_until(lambda: not any(pid_alive(k) for k in kids), 5, message="backend gone")


def test_client_cancellation_is_relayed_upstream(make):
    t = make([server("hang", "tests.servers.hang")])
    rid = t.send_request("tools/call", {"name": "hang__hang", "arguments": {}})
    wait_until(lambda: t.server_status("hang")["in_flight"] == 1, 10, message="in flight")
    t.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "user"}})
    wait_until(lambda: any("cancelled" in line for line in t.stderr), 5, message="cancel relayed")
    wait_until(lambda: t.server_status("hang")["in_flight"] == 0, 5, message="call released")
    assert text_of(t.call("hang__echo", {"text": "next"})) == "next"


def test_idempotent_requests_are_retried_once_after_a_reconnect_and_others_never(make, tmp_path):
    marker = str(tmp_path / "crashed")
    t = make([server("flaky", "tests.servers.first_call_crashes", "--marker", marker,
                     retry_idempotent_tools=True, restart=FAST_RESTART)])
    read = t.request("resources/read", {"uri": "flaky://doc"}, timeout=30)
    assert read["result"]["contents"][0]["text"] == "the doc"  # died under it, retried once, answered
    assert t.server_status("flaky")["restarts"] == 1
    wait_until(lambda: t.server_status("flaky")["state"] == "ready", 15, message="ready")
    assert text_of(t.call("flaky__idem", timeout=30)) == "idem ok"  # annotated idempotent + allowed
    wait_until(lambda: t.server_status("flaky")["state"] == "ready", 15, message="ready")
    once = t.call("flaky__once", timeout=30)["result"]
    assert once["isError"] is True  # a plain tools/call is never retried
    wait_until(lambda: t.server_status("flaky")["state"] == "ready", 15, message="ready")
    assert text_of(t.call("flaky__once")) == "once ok"
    assert t.server_status("flaky")["restarts"] == 3
