"""Drive MCP tasks through an endpoint as a real client would: raw JSON-RPC over stdio, raw
2026-07-28 JSON-RPC over Streamable HTTP (with the SEP's Mcp-Method / Mcp-Name headers),
FastMCP's client with fastmcp-tasks, and the official SDK's Client with a tasks extension."""
from __future__ import annotations

import asyncio
import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import requests

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
TASKS_EXT = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"
TERMINAL = frozenset({"completed", "failed", "cancelled"})
#: How long one request may take before a helper gives up (a test's own bound).
REQUEST_TIMEOUT = 20.0
#: How often the polling helpers ask again (they always stop at their deadline).
POLL_EVERY = 0.05


def modern_meta(tasks: bool = True) -> dict:
    """The per-request `_meta` of a 2026-07-28 client, declaring the tasks extension or not."""
    caps: dict = {"extensions": {TASKS_EXT: {}}} if tasks else {}
    return {"io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"}}


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `check` until it returns something truthy; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(POLL_EVERY)


class RawStdio:
    """A stdio MCP peer spoken to in raw JSON-RPC lines: answers are matched by id, and whatever
    the server sends on its own (requests, notifications) queues up in `incoming`, in order."""

    def __init__(self, argv: list[str], env: dict | None = None) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.ids = itertools.count(1)
        self.answers: dict[Any, queue.Queue] = {}
        self.lock = threading.Lock()
        self.incoming: queue.Queue = queue.Queue()
        #: Every message read, in order, for wire captures.
        self.log: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _box(self, rid) -> queue.Queue:
        with self.lock:
            return self.answers.setdefault(rid, queue.Queue())

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.strip():
                continue
            message = json.loads(line)
            self.log.append(message)
            if "method" in message:
                self.incoming.put(message)
            else:
                self._box(message.get("id")).put(message)

    def send(self, message: dict) -> None:
        """Write one message as one line."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def send_request(self, method: str, params: dict | None = None) -> int:
        """Send a request without waiting; returns its id."""
        rid = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return rid

    def wait_response(self, rid: int, timeout: float = REQUEST_TIMEOUT) -> dict:
        """The whole response message for `rid` (result or error)."""
        try:
            return self._box(rid).get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no answer to request {rid} within {timeout}s") from None

    def request(self, method: str, params: dict | None = None, timeout: float = REQUEST_TIMEOUT) -> dict:
        """Send a request and wait for its whole response message."""
        return self.wait_response(self.send_request(method, params), timeout)

    def next_incoming(self, timeout: float = REQUEST_TIMEOUT,
                      method: str | None = None) -> dict:
        """The next message the server sent on its own (of `method`, skipping others, if given)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                message = self.incoming.get(timeout=max(left, 0.001))
            except queue.Empty:
                raise AssertionError(f"the server sent no {method or 'message'} within {timeout}s") from None
            if method is None or message.get("method") == method:
                return message

    def respond(self, rid: Any, result: dict) -> None:
        """Answer a request the server sent."""
        self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def initialize(self, capabilities: dict | None = None, version: str = LEGACY) -> dict:
        """The handshake era's initialize + initialized; returns the initialize result."""
        answer = self.request("initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                             "clientInfo": {"name": "tasks-test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer["result"]

    def modern(self, method: str, params: dict | None = None, tasks: bool = True,
               timeout: float = REQUEST_TIMEOUT) -> dict:
        """A 2026-07-28 request: the protocol version and capabilities ride in its `_meta`."""
        return self.request(method, {**(params or {}), "_meta": modern_meta(tasks)}, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Close stdin, then end the process if it has not gone by itself."""
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            self.proc.kill()
            self.proc.wait(timeout=timeout)

    def __enter__(self) -> RawStdio:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def python_argv(module: str, *args: str) -> list[str]:
    """The command line that starts a test server module with this interpreter."""
    return [sys.executable, "-m", module, *args]
