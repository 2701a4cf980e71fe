"""stdio transport: one MCP server as a child process in its own process group."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from typing import Any

import gevent
from gevent.socket import wait_read
from loguru import logger

from actors.settings.config import StdioSpec
from actors.protocol import jsonrpc
from actors.transports.base import OnClosed, OnMessage, TransportError, TransportGarbage
from actors.transports.child_process import ChildProcess
from actors.transports.launch import spawn
from actors.transports.pipe_writer import PipeWriter

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a bigger line is refused, not parsed
STDIN_CLOSE_GRACE = 0.5  # after closing stdin, before SIGTERM
TERM_GRACE = 1.5  # after SIGTERM to the group, before SIGKILL
KILL_WAIT = 2.0
READER_STOP_WAIT = 1.0  # for a reader or writer greenlet to go once killed
STDERR_LOG_LINES_PER_SEC = 50  # a flooding child must not flood troupe's log
STDERR_MAX_LINE_BYTES = 64 * 1024  # a longer stderr line is logged in pieces of this size
READ_CHUNK_BYTES = 64 * 1024  # one read of stdout; the reader yields to the hub after each
MAX_QUEUED_WRITE_BYTES = 64 * 1024 * 1024  # beyond this a send fails at once: the server is not reading
DEFAULT_WRITE_STALL = 30.0  # a write that makes no progress this long means the server is hung
GARBAGE_SAMPLE_BYTES = 80  # how much of a non-JSON line is quoted in the log
_ID_IN_HEAD = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_ID_HEAD_BYTES = 4096


def discard(proc: ChildProcess) -> None:
    """Stop a spawned process no transport took (its group, as close() would), and reap it."""
    _stop_process_group(proc)
    _close_output(proc)


def _close_output(proc: ChildProcess) -> None:
    for stream in (proc.stdout, proc.stderr):
        try:
            stream.close()
        except OSError:
            pass


class StdioTransport:
    """Spawns the server, reads its stdout line by line, drains its stderr, kills the group.

    Nothing here blocks the caller or the hub: stdout and stdin are non-blocking pipes; stdout
    is read by its own greenlet, stdin written by a PipeWriter (the messages sent in one turn
    of the hub in one write). Sends are bounded in bytes waiting; a write
    that makes no progress for `write_timeout` seconds means the server stopped reading, and
    the transport reports itself closed (the owner then restarts it, killing its group).
    """

    def __init__(self, name: str, spec: StdioSpec, on_message: OnMessage, on_closed: OnClosed,
                 *, log=logger, max_message_bytes: int = MAX_MESSAGE_BYTES,
                 write_timeout: float = DEFAULT_WRITE_STALL, process: ChildProcess | None = None):
        self.name, self.spec = name, spec
        self._early = process  # spawned at launch already (supervision/early_start.py): open() takes it
        self._on_message, self._on_closed = on_message, on_closed
        self._log = log.bind(server=name)
        self._max = max_message_bytes
        self._write_timeout = write_timeout
        self._proc: ChildProcess | None = None
        self._readers: list[gevent.Greenlet] = []
        self._writer: PipeWriter | None = None  # stdin, written by whoever sends, one write per hub turn
        self._broken: str | None = None  # why stdin cannot be written any more
        self._closed = False
        self._close_reported = False
        # stdout line assembly (reader greenlet only)
        self._buf = bytearray()
        self._scanned = 0  # _buf[:_scanned] holds no newline
        self._skipping = False  # inside an oversized line: its rest is dropped as it arrives
        self._skipped_id: Any = None  # the request that oversized line answered, if its head says
        self._garbage = 0
        self._garbage_sample = b""

    # -- lifecycle

    def open(self) -> None:
        early, self._early = self._early, None
        self._proc = early if early is not None else spawn(self.spec)
        os.set_blocking(self._proc.stdout.fileno(), False)
        os.set_blocking(self._proc.stderr.fileno(), False)
        self._writer = PipeWriter(self._proc.stdin.fileno(), self._stdin_broken, stall_timeout=self._write_timeout)
        self._readers = [gevent.spawn(self._read_stdout), gevent.spawn(self._drain_stderr)]

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def describe(self) -> dict:
        return {"pid": self.pid}

    def set_protocol_version(self, version: str) -> None:
        pass  # stdio has no per-message version header

    def write_stalled_for(self) -> float | None:
        """Seconds the server has not taken a byte of a pending write, or None."""
        since = self._writer.stalled_since if self._writer is not None else None
        return None if since is None else time.monotonic() - since

    def send(self, message: dict) -> None:
        self.send_bytes(jsonrpc.encode(message))

    def send_bytes(self, data: bytes) -> None:
        """Queue one message for stdin; never waits for the server."""
        writer = self._writer
        if self._closed or writer is None:
            raise TransportError(f"{self.name}: not connected")
        if self._broken is not None:
            raise TransportError(f"{self.name}: {self._broken}")
        if writer.queued and writer.queued + len(data) + 1 > MAX_QUEUED_WRITE_BYTES:
            raise TransportError(f"{self.name}: not reading its stdin ({writer.queued} bytes waiting to be "
                                 f"written, limit {MAX_QUEUED_WRITE_BYTES})")
        writer.write(data + b"\n")

    def close(self) -> None:
        """Stop the writer, close stdin, SIGTERM the group, then SIGKILL it; always reap."""
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        if self._writer is not None:
            self._writer.close()  # it may be waiting on stdin's fd, which is about to be closed
        if proc is not None:
            _stop_process_group(proc)
        for g in self._readers:
            if g is not gevent.getcurrent():
                g.kill(block=True, timeout=READER_STOP_WAIT)
        if proc is not None:
            _close_output(proc)
        self._report_closed("closed by troupe")

    # -- writer (PipeWriter reports a broken or hung stdin here, in its drain greenlet)

    def _stdin_broken(self, error: OSError | None) -> None:
        if error is None:
            reason = f"hung: the server stopped reading its stdin (no write progress for {self._write_timeout:g}s)"
        else:  # EPIPE: it closed stdin or exited
            reason = self._exit_reason() or f"write to stdin failed: {error}"
        self._broken = reason
        self._log.warning("{}", reason)
        self._report_closed(reason)

    def _exit_reason(self) -> str | None:
        assert self._proc is not None  # only the writer asks, which open() started after the spawn
        try:
            code = self._proc.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            return None
        return f"process exited with code {code}"

    # -- readers (greenlets; never inside the actor)

    def _read_stdout(self) -> None:
        proc = self._proc
        assert proc is not None  # spawned by open() first
        fd = proc.stdout.fileno()
        reason = "stdout closed"
        try:
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK_BYTES)
                except BlockingIOError:
                    wait_read(fd)
                    continue
                if not chunk:
                    break
                self._take(chunk)
                self._flush_garbage()
                if len(chunk) < READ_CHUNK_BYTES:
                    # A short read emptied the pipe: wait for more rather than read it empty again
                    # (one system call less per answer).
                    wait_read(fd)
                else:
                    gevent.sleep(0)  # a server that floods stdout must not starve the other greenlets
        except OSError as exc:
            reason = f"stdout error: {exc}"
        self._flush_garbage()
        if self._closed:
            return
        code = proc.poll()
        if code is None:
            try:
                code = proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                code = None
        self._report_closed(f"process exited with code {code}" if code is not None else reason)

    def _take(self, chunk: bytes) -> None:
        """Split what was read into lines; hand on each message, count the rest."""
        buf = self._buf
        buf += chunk
        start = 0
        while (nl := buf.find(b"\n", max(start, self._scanned))) >= 0:
            self._scanned = 0
            if self._skipping:
                self._skipping = False
                self._refuse(self._skipped_id)
            elif nl - start > self._max:
                self._refuse(_id_in_head(buf[start:start + _ID_HEAD_BYTES]))
            else:
                self._line(buf[start:nl])
            start = nl + 1
        del buf[:start]
        if self._skipping:
            buf.clear()  # the rest of a refused line: never held in memory
        elif len(buf) > self._max:
            self._skipping, self._skipped_id = True, _id_in_head(buf[:_ID_HEAD_BYTES])
            buf.clear()
        self._scanned = len(buf)

    def _line(self, line: bytearray) -> None:
        line = line.strip()
        if not line:
            return
        try:
            msg = jsonrpc.decode(line)
        except jsonrpc.TooDeep as exc:  # an answer's id still fails its request at once
            self._flush_garbage()
            self._on_message(TransportGarbage(str(exc), exc.message_id if exc.answer else None))
            return
        except ValueError:
            msg = None
        if not isinstance(msg, dict):
            if not self._garbage:
                self._garbage_sample = bytes(line[:GARBAGE_SAMPLE_BYTES])
            self._garbage += 1
            return
        self._flush_garbage()  # keep the order the server wrote things in
        self._on_message(msg)

    def _flush_garbage(self) -> None:
        if self._garbage:
            lines, self._garbage = self._garbage, 0
            self._on_message(TransportGarbage(f"not a JSON-RPC message: {self._garbage_sample!r}", lines=lines))

    def _refuse(self, request_id) -> None:
        # Name the request it answered, so that caller fails now instead of timing out.
        self._flush_garbage()
        self._on_message(TransportGarbage(f"message over {self._max} bytes refused", request_id))

    def _drain_stderr(self) -> None:
        # An undrained stderr pipe deadlocks a chatty child; read it all, log a little.
        assert self._proc is not None  # spawned by open() first
        fd = self._proc.stderr.fileno()
        budget, window = STDERR_LOG_LINES_PER_SEC, 0.0
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, READ_CHUNK_BYTES)
                except BlockingIOError:
                    wait_read(fd)
                    continue
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop() if chunk else b""
                if not chunk and lines[-1] == b"":
                    lines.pop()
                if len(pending) > STDERR_MAX_LINE_BYTES:  # a line without end is logged in pieces
                    lines.append(pending)
                    pending = b""
                now = gevent.get_hub().loop.now()
                if now - window >= 1.0:
                    budget, window = STDERR_LOG_LINES_PER_SEC, now
                for line in lines[:max(budget, 0)]:
                    self._log.debug("stderr: {}", line.rstrip()[:500].decode("utf-8", "replace"))
                budget -= len(lines)
                if not chunk:
                    return
                gevent.sleep(0)  # a child that floods stderr must not starve the other greenlets
        except OSError:
            return

    def _report_closed(self, reason: str) -> None:
        if not self._close_reported:
            self._close_reported = True
            self._on_closed(reason)


def _id_in_head(head) -> Any:
    match = _ID_IN_HEAD.search(bytes(head))
    return jsonrpc.decode(match.group(1)) if match else None


def _stop_process_group(proc: ChildProcess) -> None:
    try:
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
