"""PipeWriter: newline-delimited messages out of a non-blocking pipe, one write per turn of the hub."""
from __future__ import annotations

import os
import time
from typing import Callable

import gevent
from gevent.socket import wait_write

WRITE_CHUNK_BYTES = 64 * 1024  # one write while draining (a pipe holds 64 KiB on Linux)


class PipeWriter:
    """Owns the writing end of one pipe (a server's stdin, or troupe's own stdout).

    `write` never waits. What is written in one turn of the hub (a burst of answers handled back
    to back by an actor, say) goes out in one `os.write` from a hub callback, right after the
    writing greenlet yields: one system call and no greenlet switch per message, where a writer
    greenlet cost a wake-up and a write for each. Only when the pipe is full does a drain greenlet
    take over; it waits for the reader, up to `stall_timeout` seconds without progress (None:
    forever), and reports a broken pipe through `on_broken(error)`, or a stall through
    `on_broken(None)` (in that greenlet, never inside the hub: it may block). Written in order,
    whichever greenlets write.
    """

    def __init__(self, fd: int, on_broken: Callable[[OSError | None], None], *, stall_timeout: float | None = None):
        os.set_blocking(fd, False)
        self._fd = fd
        self._on_broken = on_broken
        self._stall_timeout = stall_timeout
        self._pending: list[bytes] = []
        self.queued = 0  # bytes accepted and not yet written
        self._scheduled = False  # a hub callback will write _pending
        self._drainer: gevent.Greenlet | None = None  # waiting for the pipe to take more
        self.stalled_since: float | None = None  # monotonic time the pipe stopped taking bytes
        self.closed = False

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._pending.append(data)
        self.queued += len(data)
        if not self._scheduled and self._drainer is None:
            self._scheduled = True
            gevent.get_hub().loop.run_callback(self._flush)

    def _flush(self) -> None:
        """Hub callback: only a non-blocking write happens here; anything else goes to the drainer."""
        self._scheduled = False
        if self.closed or self._drainer is not None or not self._pending:
            return
        data = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        try:
            done = os.write(self._fd, data)
        except BlockingIOError:
            done = 0
        except OSError:
            done = 0  # the drainer meets the same error and reports it outside the hub
        self.queued -= done
        if done < len(data):
            self._drainer = gevent.spawn(self._drain, memoryview(data)[done:])

    def _drain(self, data: memoryview) -> None:
        try:
            while data:
                while data:
                    try:
                        done = os.write(self._fd, data[:WRITE_CHUNK_BYTES])
                    except BlockingIOError:
                        if self.stalled_since is None:
                            self.stalled_since = time.monotonic()
                        try:
                            wait_write(self._fd, timeout=self._stall_timeout)
                        except TimeoutError:
                            self._broken(None)
                            return
                        continue
                    except OSError as exc:  # EPIPE: the reader closed its end or exited
                        self._broken(exc)
                        return
                    self.stalled_since = None
                    self.queued -= done
                    data = data[done:]
                if self._pending:  # written while this waited: in order, after it
                    data = memoryview(b"".join(self._pending))
                    self._pending.clear()
        finally:
            self._drainer = None

    def _broken(self, error: OSError | None) -> None:
        self.closed = True
        self._pending.clear()
        self.queued = 0
        self._on_broken(error)

    def flush(self, timeout: float) -> None:
        """Wait (bounded) until everything written so far is out: before the fd is closed."""
        if self._pending and self._drainer is None and not self.closed:
            self._scheduled = False
            self._drainer = gevent.spawn(self._drain, memoryview(b"".join(self._pending)))
            self._pending.clear()
        drainer = self._drainer
        if drainer is not None:
            drainer.join(timeout=timeout)

    def close(self) -> None:
        """Write nothing more (the fd is the owner's to close); a waiting drain is stopped."""
        self.closed = True
        self._pending.clear()
        drainer = self._drainer
        if drainer is not None and drainer is not gevent.getcurrent():
            drainer.kill(block=True, timeout=1.0)
