"""Run troupe as a real process and talk raw JSON-RPC to it over stdio (plain threads)."""
from __future__ import annotations

import itertools
import os
import queue
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import yaml

from tests.support import PYTHON, ROOT


def server(name: str, module: str, *args: str, **extra) -> dict:
    """A troupe config entry for one of tests/servers (launched with this interpreter)."""
    entry = {"name": name, "transport": {"type": "stdio", "stdio": {
        "command": PYTHON, "args": ["-m", module, *args], "work_dir": str(ROOT)}}}
    entry.update(extra)
    return entry


def stdio_params(config: Path, *args: str, env: dict | None = None):
    """The official SDK's parameters to launch troupe over stdio. The SDK passes a launched
    server only HOME, PATH and the like, so the test's environment (its own TROUPE_CONFIG_DIR:
    approvals and pins, see tests/conftest.py) is handed on explicitly: without it, every such
    troupe shared the user's ~/.config/troupe, and pins one test recorded withheld another's tools."""
    from mcp import StdioServerParameters  # the SDK is a test peer: only the tests that use it load it

    return StdioServerParameters(command=PYTHON, args=["-m", "actors.main", "--config", str(config), *args],
                                 cwd=str(ROOT), env={**os.environ, **(env or {})})


def write_config(tmp_path: Path, servers: list[dict], **serve) -> Path:
    path = tmp_path / "troupe.yaml"
    path.write_text(yaml.safe_dump({"servers": servers, "serve": {"startup_wait": 15, **serve},
                                    "discovery": {"enabled": False}}))
    return path


class Troupe:
    """troupe over stdio: every line it writes is kept, in order, for later validation."""

    def __init__(self, config: Path, *extra_args: str, env: dict | None = None, module: str = "actors.main"):
        self.proc = subprocess.Popen(
            [PYTHON, "-m", module, "--config", str(config), *extra_args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
            env={**os.environ, **(env or {})})
        self.sent: list[Any] = []
        self.received: list[dict] = []
        self._responses: dict[Any, queue.Queue] = {}
        self.notifications: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        # Kept: a test that reads all of stderr joins it once troupe has exited.
        self.stderr_reader = threading.Thread(target=self._read_err, daemon=True)
        self.stderr_reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            msg = orjson.loads(line)
            self.received.append(msg)
            if "id" in msg and "method" not in msg:
                self._box(msg["id"]).put(msg)
            else:
                self.notifications.put(msg)

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line.decode("utf-8", "replace"))

    def _box(self, rid) -> queue.Queue:
        with self._lock:
            return self._responses.setdefault(rid, queue.Queue())

    def send(self, message: Any) -> None:
        self.sent.append(message)
        data = message if isinstance(message, bytes) else orjson.dumps(message)
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict | None = None, timeout: float = 20.0) -> dict:
        return self.wait_response(self.send_request(method, params), timeout)

    def send_request(self, method: str, params: dict | None = None):
        rid = next(self._ids)
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def wait_response(self, rid, timeout: float = 20.0) -> dict:
        try:
            return self._box(rid).get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to request {rid} within {timeout}s; stderr:\n"
                                 + "".join(self.stderr[-30:])) from None

    def initialize(self) -> dict:
        result = self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                             "clientInfo": {"name": "troupe-tests", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def call(self, name: str, arguments: dict | None = None, timeout: float = 20.0) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}}, timeout)

    def status(self) -> dict:
        return orjson.loads(self.call("core_status")["result"]["content"][0]["text"])

    def server_status(self, name: str) -> dict:
        return next(s for s in self.status()["servers"] if s["name"] == name)

    def close(self, timeout: float = 10.0) -> int:
        """EOF on stdin, the way a client leaves; returns the exit code."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
                raise AssertionError(f"troupe did not exit within {timeout}s of stdin EOF") from None
        return self.proc.returncode


def text_of(response: dict) -> str:
    return response["result"]["content"][0]["text"]


def json_of(response: dict) -> Any:
    return orjson.loads(text_of(response))


def children_of(pid: int) -> list[int]:
    """Every live descendant pid of `pid` (from /proc; zombies excluded)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] == "Z":
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def monotonic() -> float:
    return time.monotonic()


class TroupeHttp:
    """troupe with --transport http --port 0; the URL is read from its announcement line."""

    def __init__(self, config: Path, *extra_args: str, env: dict | None = None, timeout: float = 30.0,
                 module: str = "actors.main"):
        self.proc = subprocess.Popen(
            [PYTHON, "-m", module, "--config", str(config), "--transport", "http", "--port", "0", *extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
            env={**os.environ, **(env or {})})
        self.stderr: list[str] = []
        self._url: queue.Queue = queue.Queue()
        threading.Thread(target=self._read_err, daemon=True).start()
        try:
            self.url = self._url.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            raise AssertionError("troupe did not announce its URL:\n" + "".join(self.stderr[-30:])) from None
        self.base = self.url[: -len("/mcp")]

    def _read_err(self) -> None:
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace")
            self.stderr.append(line)
            if line.startswith("troupe: serving "):
                self._url.put(line.split()[-1])

    def stop(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"troupe did not stop within {timeout}s of SIGTERM") from None
        return self.proc.returncode
