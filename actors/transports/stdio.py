"""stdio transport: one MCP server as a child process in its own process group."""
from __future__ import annotations

import os
import re
import signal
import subprocess
from typing import Any

import gevent
from loguru import logger

from ..config import StdioSpec
from ..protocol import jsonrpc
from .base import OnClosed, OnMessage, TransportError, TransportGarbage

# Variables a child inherits from troupe; everything else must be set in `env`.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME",
                 "SHELL", "TERM", "SYSTEMROOT", "NODE_PATH", "VIRTUAL_ENV", "PYTHONPATH")
MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a bigger line is refused, not parsed
STDIN_CLOSE_GRACE = 0.5  # after closing stdin, before SIGTERM
TERM_GRACE = 1.5  # after SIGTERM to the group, before SIGKILL
KILL_WAIT = 2.0
STDERR_LOG_LINES_PER_SEC = 50  # a flooding child must not flood troupe's log
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def child_env(extra: dict | Any) -> dict:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(extra or {})
    return env


class StdioTransport:
    """Spawns the server, reads its stdout line by line, drains its stderr, kills the group."""

    def __init__(self, name: str, spec: StdioSpec, on_message: OnMessage, on_closed: OnClosed,
                 *, log=logger, max_message_bytes: int = MAX_MESSAGE_BYTES):
        self.name, self.spec = name, spec
        self._on_message, self._on_closed = on_message, on_closed
        self._log = log.bind(server=name)
        self._max = max_message_bytes
        self._proc: subprocess.Popen | None = None
        self._readers: list[gevent.Greenlet] = []
        self._closed = False
        self._close_reported = False

    # -- lifecycle

    def open(self) -> None:
        try:
            self._proc = subprocess.Popen(
                [self.spec.command, *self.spec.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=child_env(self.spec.env), cwd=self.spec.work_dir,
                start_new_session=True, bufsize=-1)
        except (OSError, ValueError) as exc:
            raise TransportError(f"cannot start {self.spec.command!r}: {exc}") from None
        self._readers = [gevent.spawn(self._read_stdout), gevent.spawn(self._drain_stderr)]

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def describe(self) -> dict:
        return {"pid": self.pid}

    def set_protocol_version(self, version: str) -> None:
        pass  # stdio has no per-message version header

    def send(self, message: dict) -> None:
        self.send_bytes(jsonrpc.encode(message))

    def send_bytes(self, data: bytes) -> None:
        proc = self._proc
        if self._closed or proc is None or proc.stdin is None:
            raise TransportError(f"{self.name}: not connected")
        try:
            proc.stdin.write(data + b"\n")
            proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise TransportError(f"{self.name}: write failed: {exc}") from None

    def close(self) -> None:
        """Close stdin, then SIGTERM the group, then SIGKILL it; always reap."""
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        if proc is not None:
            _stop_process_group(proc)
        for g in self._readers:
            g.kill(block=False)
        self._report_closed("closed by troupe")

    # -- readers (greenlets; never inside the actor)

    def _read_stdout(self) -> None:
        proc = self._proc
        stdout = proc.stdout
        reason = "stdout closed"
        try:
            while True:
                line = stdout.readline(self._max + 1)
                if not line:
                    break
                if len(line) > self._max and not line.endswith(b"\n"):
                    self._skip_oversized(stdout, line)
                    continue
                line = line.strip()
                if not line:
                    continue
                try:
                    msg = jsonrpc.decode(line)
                except ValueError:
                    self._on_message(TransportGarbage(f"not JSON: {line[:80]!r}"))
                    continue
                self._on_message(msg)
        except (OSError, ValueError) as exc:
            reason = f"stdout error: {exc}"
        code = proc.poll()
        if code is None and not self._closed:
            try:
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        self._report_closed(f"process exited with code {code}" if code is not None else reason)

    def _skip_oversized(self, stdout, head: bytes) -> None:
        # Find which request it answered, so that caller fails now instead of timing out.
        match = _ID_IN_HEAD.search(head[:4096])
        request_id = jsonrpc.decode(match.group(1)) if match else None
        while True:  # discard the rest of the line without holding it in memory
            chunk = stdout.readline(1 << 20)
            if not chunk or chunk.endswith(b"\n"):
                break
        self._on_message(TransportGarbage(f"message over {self._max} bytes refused", request_id))

    def _drain_stderr(self) -> None:
        # An undrained stderr pipe deadlocks a chatty child; read it all, log a little.
        stderr = self._proc.stderr
        budget, window = STDERR_LOG_LINES_PER_SEC, 0.0
        try:
            while True:
                line = stderr.readline(65536)
                if not line:
                    return
                now = gevent.get_hub().loop.now()
                if now - window >= 1.0:
                    budget, window = STDERR_LOG_LINES_PER_SEC, now
                if budget > 0:
                    budget -= 1
                    self._log.debug("stderr: {}", line.rstrip()[:500].decode("utf-8", "replace"))
        except (OSError, ValueError):
            return

    def _report_closed(self, reason: str) -> None:
        if not self._close_reported:
            self._close_reported = True
            self._on_closed(reason)


def _stop_process_group(proc: subprocess.Popen) -> None:
    try:
        if proc.stdin:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=STDIN_CLOSE_GRACE)
    except subprocess.TimeoutExpired:
        pass
    # The group goes even if the leader already exited: grandchildren must not be orphaned.
    for sig, grace in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, KILL_WAIT)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=grace)
            if sig == signal.SIGTERM:
                # leader gone; make sure no group member survives it
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            break
        except subprocess.TimeoutExpired:
            continue
    for stream in (proc.stdout, proc.stderr):
        try:
            if stream:
                stream.close()
        except OSError:
            pass
