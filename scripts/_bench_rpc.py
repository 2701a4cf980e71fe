"""Child processes and minimal raw JSON-RPC clients (stdio pipes, HTTP keep-alive) for scripts/bench.py."""
from __future__ import annotations

import http.client
import itertools
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
PROTOCOL = "2025-06-18"  # every peer here speaks it, the TypeScript SDK included
_live: list["Proc"] = []  # every child still running, so a failure anywhere can kill them all
LOGS = Path(tempfile.mkdtemp(prefix="troupe-bench-"))
# troupe pins what its backends list; a benchmark's pins belong to the benchmark, not to ~/.config
os.environ.setdefault("TROUPE_CONFIG_DIR", str(LOGS / "troupe-config"))
_log_ids = itertools.count(1)


class BenchError(Exception):
    """A path could not be measured (a child died, an answer was wrong or late)."""


class Proc:
    """A child in its own process group with stderr in a log file; stop() ends the whole group."""

    def __init__(self, cmd: list[str], *, label: str, env: dict | None = None, pipes: bool = True):
        self.label = label
        self.log_path = LOGS / f"{next(_log_ids):03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', label)}.log"
        self._log = open(self.log_path, "wb")
        pipe = subprocess.PIPE if pipes else subprocess.DEVNULL
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(cmd, stdin=pipe, stdout=pipe, stderr=self._log, cwd=ROOT,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        self.pid = self.proc.pid
        _live.append(self)

    def stderr_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_stderr(self, pattern: str, timeout: float) -> re.Match:
        """Poll the log until a line matches (bounded); the child's death ends the wait early."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        while True:
            found = regex.search(self.stderr_text())
            if found:
                return found
            if self.proc.poll() is not None:
                raise BenchError(f"{self.label} exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                raise BenchError(f"{self.label}: no {pattern!r} on stderr in {timeout}s:\n{self.tail()}")
            time.sleep(0.01)

    def tail(self, lines: int = 15) -> str:
        return "\n".join(self.stderr_text().splitlines()[-lines:])

    def stop(self, timeout: float = 5.0, grace: float = 1.0) -> None:
        """Close stdin (a stdio server's cue to leave), wait `grace`, then SIGTERM and SIGKILL the process group."""
        if self in _live:
            _live.remove(self)
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            else:
                grace = 0.0  # no stdin to close: go straight to SIGTERM
        except OSError:
            pass
        for sig, wait in ((None, grace), (signal.SIGTERM, timeout), (signal.SIGKILL, timeout)):
            if sig is not None:
                try:
                    os.killpg(self.pid, sig)
                except ProcessLookupError:
                    break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # Grandchildren in the group (the FastMCP proxy's backends) must not outlive it; troupe gives
        # each backend its own group and stops them itself, and they also leave on stdin EOF.
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def stop_all() -> None:
    """Kill every child still running (called from the benchmark's finally and signal handlers)."""
    for proc in list(_live):
        proc.stop(timeout=2.0)


def rss_kib(pid: int) -> int:
    """Resident set size of one process (not its children), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise BenchError(f"no VmRSS for pid {pid}")


def check_reply(reply: dict, method: str) -> dict:
    if "error" in reply:
        raise BenchError(f"{method} failed: {reply['error']}")
    result = reply["result"]
    if isinstance(result, dict) and result.get("isError"):
        raise BenchError(f"{method} answered isError: {str(result)[:300]}")
    return result


def init_params(name: str = "troupe-bench") -> dict:
    return {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}


class StdioRpc(Proc):
    """Blocking newline-delimited JSON-RPC over a child's pipes: write a line, read lines up to the answer."""

    def __init__(self, cmd: list[str], *, label: str, env: dict | None = None):
        super().__init__(cmd, label=label, env=env)
        self._ids = itertools.count(1)
        self._in, self._out = self.proc.stdin, self.proc.stdout
        self.expired = False

    def request(self, method: str, params: dict | None = None, timeout: float | None = None) -> dict:
        """One request; with a timeout, a watchdog kills the child if the answer is late (the hot loop has none)."""
        rid = next(self._ids)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        watchdog = None
        if timeout is not None:
            watchdog = threading.Timer(timeout, self._expire)
            watchdog.daemon = True
            watchdog.start()
        try:
            self._in.write(orjson.dumps(msg) + b"\n")
            self._in.flush()
            while True:  # notifications and logs may come first: skip to our answer
                line = self._out.readline()
                if not line:
                    if self.expired:
                        raise BenchError(f"{self.label}: no answer to {method} within {timeout} s")
                    raise BenchError(f"{self.label} closed stdout during {method}:\n{self.tail()}")
                try:
                    reply = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # not ours: py-spy announces itself on the same stdout
                if reply.get("id") == rid and "method" not in reply:
                    return check_reply(reply, method)
        finally:
            if watchdog is not None:
                watchdog.cancel()

    def _expire(self) -> None:
        self.expired = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def notify(self, method: str) -> None:
        self._in.write(orjson.dumps({"jsonrpc": "2.0", "method": method}) + b"\n")
        self._in.flush()

    def initialize(self, timeout: float | None = 60.0) -> dict:
        result = self.request("initialize", init_params(), timeout=timeout)
        self.notify("notifications/initialized")
        return result

    def call(self, name: str, arguments: dict, timeout: float | None = None) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments}, timeout=timeout)

    def list_tools(self, timeout: float | None = 180.0) -> list[dict]:
        return list_all_tools(lambda method, params: self.request(method, params, timeout=timeout))


def list_all_tools(request) -> list[dict]:
    """tools/list page by page."""
    tools, cursor = [], None
    while True:
        result = request("tools/list", {"cursor": cursor} if cursor else {})
        tools.extend(result["tools"])
        cursor = result.get("nextCursor")
        if not cursor:
            return tools


def parse_body(content_type: str, body: bytes, rid: Any) -> dict:
    """The answer from a JSON body or from an SSE body (events may precede it)."""
    if content_type.startswith("application/json"):
        return orjson.loads(body)
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = b"\n".join(line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:"))
        if data:
            message = orjson.loads(data)
            if message.get("id") == rid and "method" not in message:
                return message
    raise BenchError(f"no answer to request {rid} in the response body: {body[:300]!r}")


STALE_CONNECTION = (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected,
                    http.client.CannotSendRequest)


class HttpRpc:
    """One Streamable HTTP client session over one keep-alive connection (http.client: the cheapest client)."""

    def __init__(self, url: str, timeout: float = 30.0):
        parts = urlsplit(url)
        self.path = parts.path or "/"
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        self._ids = itertools.count(1)

    def _post(self, msg: dict, headers: dict | None = None) -> tuple[int, str, bytes, http.client.HTTPResponse]:
        try:
            return self._post_once(msg, headers)
        except STALE_CONNECTION:
            # A server may close an idle keep-alive connection (Node does after 5 s, which a
            # loaded machine reaches while 32 sessions initialize): reconnect once and resend.
            self.conn.close()
            return self._post_once(msg, headers)

    def _post_once(self, msg: dict, headers: dict | None) -> tuple[int, str, bytes, http.client.HTTPResponse]:
        self.conn.request("POST", self.path, orjson.dumps(msg), headers or self.headers)
        resp = self.conn.getresponse()
        body = resp.read()
        return resp.status, resp.getheader("Content-Type", ""), body, resp

    def request(self, method: str, params: dict | None = None) -> dict:
        rid = next(self._ids)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        status, ctype, body, resp = self._post(msg)
        if status != 200:
            raise BenchError(f"HTTP {status} for {method}: {body[:300]!r}")
        if method == "initialize":
            sid = resp.getheader("Mcp-Session-Id")
            if sid:
                self.headers["Mcp-Session-Id"] = sid
        return check_reply(parse_body(ctype, body, rid), method)

    def initialize(self) -> dict:
        result = self.request("initialize", init_params())
        self.headers["MCP-Protocol-Version"] = result.get("protocolVersion", PROTOCOL)
        status, _, body, _ = self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status not in (200, 202, 204):
            raise BenchError(f"HTTP {status} for notifications/initialized: {body[:200]!r}")
        return result

    def call(self, name: str, arguments: dict) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def list_tools(self) -> list[dict]:
        return list_all_tools(self.request)

    def close(self) -> None:
        self.conn.close()


def wait_http(url: str, timeout: float, proc: Proc | None = None) -> None:
    """Bounded poll until something accepts TCP connections at url's port."""
    import socket
    parts = urlsplit(url)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((parts.hostname, parts.port), timeout=0.5):
                return
        except OSError:
            pass
        if proc is not None and proc.proc.poll() is not None:
            raise BenchError(f"{proc.label} exited ({proc.proc.returncode}):\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise BenchError(f"nothing listening at {url} after {timeout}s")
        time.sleep(0.02)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentiles(samples: list[float]) -> dict:
    """p50/p99/mean in milliseconds from samples in seconds."""
    if not samples:
        raise BenchError("no samples")
    s = sorted(samples)

    def pick(q: float) -> float:
        return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] * 1000.0
    return {"p50_ms": pick(0.50), "p99_ms": pick(0.99), "mean_ms": sum(s) / len(s) * 1000.0, "n": len(s)}


def time_calls(fn, count: int, warmup: int, budget_s: float | None = None) -> dict:
    """Call fn() warmup+count times back to back; latencies of the counted ones (stops early at budget_s)."""
    for _ in range(warmup):
        fn()
    samples = []
    clock = time.perf_counter
    start = clock()
    for _ in range(count):
        t0 = clock()
        fn()
        samples.append(clock() - t0)
        if budget_s is not None and t0 - start > budget_s:
            break
    return percentiles(samples)
