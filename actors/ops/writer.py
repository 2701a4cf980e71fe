"""The audit writer: records queued by the call path (bounded: a full queue drops them, counted),
encoded and appended to the audit file by one greenlet of its own, off the call path."""
from __future__ import annotations

import threading
import time

import gevent
import gevent.queue
import orjson
from loguru import logger

from actors.ops.audit_file import AuditFile

QUEUE_MAX = 10_000  # records waiting for the writer; past this, new ones are dropped (and counted)
BATCH_MAX = 500  # records encoded and written in one append
# After the first record of a batch, the writer waits this long for more before it writes: under
# load one stat and one write per batch, not per call, and a call's end wakes no greenlet (measured:
# writing each record as it came added 33 µs to a 70 µs stdio→stdio call; see scripts/audit_bench.py).
FLUSH_DELAY = 0.05
STOP_TIMEOUT = 2.0  # how long a stop waits for the queue to drain
WARN_EVERY_S = 60.0  # a failing disk is logged at most this often
_STOP = object()


class AuditWriter:
    """Owns the audit file (an AuditFile) and the figures of writing it. `offer` is called from
    any greenlet and only queues; the writer greenlet alone encodes, writes and counts what it
    wrote. Drops happen in the offering greenlets, so their count is kept under a lock."""

    def __init__(self, file: AuditFile, queue_max: int = QUEUE_MAX) -> None:
        self._file = file
        self._queue: gevent.queue.Queue = gevent.queue.Queue(maxsize=queue_max)
        self._queue_max = queue_max
        self._lock = threading.Lock()  # guards _dropped, the one figure several greenlets write
        self._dropped = 0
        self._written = 0  # the writer greenlet's
        self._failed = 0  # the writer greenlet's: records lost to a failing write
        self._last_warning = 0.0
        self._greenlet: gevent.Greenlet | None = None
        self._writing = False  # a batch is being written in the hub's thread pool
        self._closed = False

    def start(self) -> AuditWriter:
        self._greenlet = gevent.spawn(self._run)
        return self

    def offer(self, record) -> None:
        """Queue `record` (a CallRecord or ActRecord) for the file; dropped if the queue is full."""
        if self._closed:
            return
        try:
            self._queue.put_nowait(record)
        except gevent.queue.Full:
            with self._lock:
                self._dropped += 1

    def stats(self) -> dict:
        """The audit section of /status: the file, what was written, dropped and lost, the bound."""
        with self._lock:
            dropped = self._dropped
        return {"file": self._file.path, "written": self._written, "dropped": dropped, "failed": self._failed,
                "queued": self._queue.qsize(), "queue_max": self._queue_max, "rotations": self._file.rotations,
                "max_bytes": self._file.max_bytes, "keep": self._file.keep}

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Write what is queued (bounded by `timeout`), then close the file."""
        if self._closed:
            return
        self._closed = True
        greenlet = self._greenlet
        if greenlet is None:
            self._file.close()
            return
        try:
            self._queue.put(_STOP, timeout=timeout)
        except gevent.queue.Full:
            pass
        greenlet.join(timeout=timeout)
        if not greenlet.dead:
            greenlet.kill(block=False)
        if not self._writing:  # (a write stuck on its disk keeps the file: its thread still holds it)
            self._file.close()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            if batch[0] is not _STOP:
                gevent.sleep(FLUSH_DELAY)
            while len(batch) < BATCH_MAX and not self._queue.empty():
                batch.append(self._queue.get_nowait())
            stop = any(item is _STOP for item in batch)
            records = [item for item in batch if item is not _STOP]
            if records:
                self._write(records)
            if stop:
                return

    def _write(self, records: list) -> None:
        lines = [orjson.dumps(r.to_json()) + b"\n" for r in records]
        try:
            # In a thread of the hub's pool: a regular file's write, stat or rename cannot yield, and a
            # slow disk (NFS, nearly full) must stall this greenlet, never the hub and every call on it.
            self._writing = True
            try:
                gevent.get_hub().threadpool.apply(self._file.write_lines, (lines,))
            finally:
                self._writing = False
            self._written += len(records)
        except (OSError, TypeError) as exc:
            self._failed += len(records)
            now = time.monotonic()
            if now - self._last_warning >= WARN_EVERY_S:
                self._last_warning = now
                logger.warning("audit: cannot write {}: {} ({} records lost so far)", self._file.path, exc,
                               self._failed)
