"""Issue 26, item 1, on stdio: a client that stops reading troupe's stdout while a server floods
logs. troupe stays bounded (logs dropped past serve.stream_buffer_bytes), keeps serving (the
answers of calls made meanwhile all arrive once the client reads again), and when even its
answers no longer fit it ends that client, its one client, cleanly with a log line."""
from __future__ import annotations

import subprocess
import threading
import time

import orjson

from tests.e2e.test_stalls import _rss
from tests.support import PYTHON, ROOT
from tests.support.troupe import server, write_config

LIMIT = 1024 * 1024  # serve.stream_buffer_bytes here: small, so its answers overflow it quickly
RSS_BOUND = 40 * 1024 * 1024
FLOOD_S = 5.0
BIG_ANSWER = 256 * 1024


class StdioClient:
    """troupe over stdio, read only when the test says so."""

    def __init__(self, config) -> None:
        self.proc = subprocess.Popen([PYTHON, "-m", "actors.main", "--config", str(config)], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr: list[bytes] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()  # type: ignore[arg-type]
        self.ids = 0

    def send(self, method: str, params: dict | None = None, notify: bool = False):
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.ids += 1
            message["id"] = self.ids
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(message) + b"\n")
        self.proc.stdin.flush()
        return message.get("id")

    def answers(self, ids: set, timeout: float = 60.0) -> dict:
        """Read stdout until every id in `ids` is answered; the answers by id."""
        assert self.proc.stdout is not None
        got: dict = {}
        deadline = time.monotonic() + timeout
        while set(got) < ids:
            assert time.monotonic() < deadline, f"unanswered: {ids - set(got)}"
            line = self.proc.stdout.readline()
            assert line, "troupe closed stdout"
            msg = orjson.loads(line)
            if "method" not in msg and msg.get("id") in ids:
                got[msg["id"]] = msg
        return got


def _watch_rss(pid: int, seconds: float, proc: subprocess.Popen) -> int:
    """troupe's peak RSS over an observation window of `seconds` (or until it exits)."""
    peak, ends = 0, time.monotonic() + seconds
    while time.monotonic() < ends and proc.poll() is None:
        try:
            peak = max(peak, _rss(pid))
        except (OSError, AssertionError):  # it exited (a zombie has no VmRSS) between the poll and the read
            break
        time.sleep(0.2)
    return peak


def test_a_stdio_client_that_stops_reading_is_bounded_then_ended_cleanly(tmp_path):
    config = write_config(tmp_path, [server("flood", "tests.servers.flood"), server("echo", "tests.servers.echo")],
                          mode="flat", stream_buffer_bytes=LIMIT)
    c = StdioClient(config)
    try:
        first = c.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "clientInfo": {"name": "slow", "version": "1"}})
        c.answers({first})
        c.send("notifications/initialized", notify=True)
        c.answers({c.send("logging/setLevel", {"level": "debug"}), c.send("tools/list")})
        before = _rss(c.proc.pid)
        # the client stops reading; a flood of logs starts, and the client calls on meanwhile
        flood = c.send("tools/call", {"name": "flood__flood_logs",
                                      "arguments": {"seconds": FLOOD_S, "mb_per_s": 10, "kb": 64}})
        calls = {c.send("tools/call", {"name": "echo__echo", "arguments": {"text": f"m{i}"}}) for i in range(5)}
        peak = _watch_rss(c.proc.pid, FLOOD_S + 2, c.proc)
        print(f"stdio flood: RSS {before / 2**20:.0f} -> peak {peak / 2**20:.0f} MiB")
        assert peak - before < RSS_BOUND
        assert c.proc.poll() is None  # logs alone never end the client: they are dropped
        got = c.answers(calls | {flood})  # it reads again: every answer is there, none dropped
        assert all("result" in got[i] for i in calls), got
        # now only answers, big ones, and the client reads nothing: troupe ends it
        for _ in range(4 * LIMIT // BIG_ANSWER + 4):
            try:
                c.send("tools/call", {"name": "echo__echo", "arguments": {"text": "y" * BIG_ANSWER}})
            except BrokenPipeError:
                break  # troupe has ended this client already: what the rest of the test checks
        peak = max(peak, _watch_rss(c.proc.pid, 30, c.proc))
        assert c.proc.wait(timeout=30) == 0
        assert peak - before < RSS_BOUND
        text = b"".join(c.stderr).decode("utf-8", "replace")
        assert "the client stopped reading its answers" in text, text[-2000:]
        assert "log notifications" in text and "dropped for a client that fell behind" in text
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
            c.proc.wait()
