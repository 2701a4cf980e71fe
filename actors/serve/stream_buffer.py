"""StreamBuffer: the byte-counted outbox toward one consumer (an SSE stream), its policy past
serve.stream_buffer_bytes, and the StreamStats that /status and /metrics show.

The policy, the same for every front (troupe's stdout applies it to its PipeWriter's count):
progress and log notifications (`DROPPABLE`) are taken only while the buffer holds less than
NOTICE_SHARE of the limit, and are otherwise dropped and counted, so that the rest stays free
for answers; anything else (answers, server→client requests, list_changed) is taken up to the
whole limit, or when the buffer is empty (one big answer is never refused for its size alone).
What still does not fit closes the stream: the buffer is emptied and its consumer disconnected,
and the front ends what the consumer had open (its calls are cancelled, as on a hang-up).
Each message costs one length and two additions: its bytes are counted as encoded once.
"""
from __future__ import annotations

import socket
from collections import deque
from typing import Any, Callable

import gevent
import gevent.event


# The WSGI environ key of a connection's socket, for streams that watch for a hang-up. Here, not in
# listener.py (gevent's pywsgi): the stdio front uses this module and loads no HTTP server.
SOCKET_KEY = "troupe.socket"

NOTICE_SHARE = 0.75  # droppable notifications may fill this share of the limit; the rest is for answers
DROPPABLE = {"notifications/progress": "progress", "notifications/message": "log"}  # method → kind counted
# A stream closed for slowness gets this long to take what is left (an /events reader's final
# event); then its socket is shut down, which ends a writer blocked on a reader that reads nothing.
CLOSE_GRACE_S = 5.0
EMPTY = object()  # get(): nothing came within the timeout


def droppable(message: Any) -> str | None:
    """`progress` or `log` for a progress or log notification (what is dropped first when its
    consumer falls behind), None for anything else."""
    return DROPPABLE.get(message.get("method") or "") if type(message) is dict else None


class StreamStats:
    """Since start, by front (`events`, `session`, `legacy`, `post`, `modern`, `stdio`): progress
    and log notifications dropped, their bytes, streams closed because their consumer did not keep
    up, and the bytes waiting for consumers now. Owned by the front that makes it (McpHttp, the
    stdio front); written only by its StreamBuffers, each change a plain addition with no yield in
    between."""

    __slots__ = ("_fronts",)

    def __init__(self) -> None:
        self._fronts: dict[str, dict[str, int]] = {}  # front → progress, log, bytes, closed, buffered

    def of(self, front: str) -> dict[str, int]:
        """The figures of one front (a StreamBuffer keeps the dict: one lookup per stream, not per message)."""
        figures = self._fronts.get(front)
        if figures is None:
            figures = self._fronts[front] = {"progress": 0, "log": 0, "bytes": 0, "closed": 0, "buffered": 0}
        return figures

    def report(self) -> dict:
        """The `streams` figure of GET /status (and the source of /metrics' troupe_stream_*)."""
        return {front: {"dropped": {"progress": f["progress"], "log": f["log"]}, "dropped_bytes": f["bytes"],
                        "closed_slow": f["closed"], "buffered_bytes": f["buffered"]}
                for front, f in sorted(self._fronts.items())}


_NO_FIGURES: dict[str, int] = {"progress": 0, "log": 0, "bytes": 0, "closed": 0, "buffered": 0}  # stats=None


class StreamBuffer:
    """The encoded messages waiting for one consumer, at most `limit` bytes of them.

    Producers (a Session's greenlet, the bus, a handler) call `offer` with encoded bytes, or `put`
    with what is never counted (sentinels, and a per-call stream's own answer: one message, bounded
    by the upstream message limit); the one consumer, the stream's handler greenlet, calls `get`.
    Nothing here blocks a producer. When the consumer leaves, `close` drops what is left.
    """

    __slots__ = ("limit", "_soft", "queued", "_items", "_ready", "closed", "slow", "dropped", "dropped_bytes",
                 "lost", "lost_bytes", "on_overflow", "_figures")

    def __init__(self, limit: int, stats: StreamStats | None = None, front: str = "stream",
                 on_overflow: Callable[[], None] | None = None) -> None:
        self.limit = limit
        self._soft = int(limit * NOTICE_SHARE)
        self.queued = 0  # bytes offered and not yet taken by the consumer
        self._items: deque = deque()
        self._ready = gevent.event.Event()
        self.closed = False  # offers are refused: closed by its consumer, its front, or for slowness
        self.slow = False  # closed for slowness
        self.dropped = 0  # notifications dropped on this stream, and their bytes
        self.dropped_bytes = 0
        self.lost = 0  # messages discarded when it was closed for slowness (the refused one too), their bytes
        self.lost_bytes = 0
        # Called once when it is closed for slowness, in the producer's greenlet (must not block):
        # the consumer's front ends the stream there (a sentinel, a delayed socket shut-down).
        self.on_overflow = on_overflow
        self._figures = stats.of(front) if stats is not None else dict(_NO_FIGURES)

    def offer(self, data: bytes, can_drop: str | None) -> bool:
        """Queue encoded `data`. True when it was queued, or dropped and counted (`can_drop`, its
        kind, past NOTICE_SHARE of the limit); False when it did not fit: the buffer is then closed
        and emptied (and `on_overflow` called), or it was closed already."""
        if self.closed:
            return False
        size = len(data)
        if can_drop:
            if self.queued + size > self._soft:
                self.dropped += 1
                self.dropped_bytes += size
                figures = self._figures
                figures[can_drop] += 1
                figures["bytes"] += size
                return True
        elif self.queued and self.queued + size > self.limit:
            self.overflow(size)
            return False
        self.queued += size
        self._figures["buffered"] += size
        self._items.append(data)
        self._ready.set()
        return True

    def overflow(self, refused: int = 0) -> None:
        """Close for slowness: what waits is discarded (its memory released now) and counted in
        `lost`, with the `refused` bytes that did not fit; the stream is counted once as closed."""
        if self.closed:
            return
        self.lost = sum(type(item) is bytes for item in self._items) + (1 if refused else 0)
        self.lost_bytes = self.queued + refused
        self.close()
        self.slow = True
        self._figures["closed"] += 1
        if self.on_overflow is not None:
            self.on_overflow()

    def put(self, item: Any) -> None:
        """Queue something that is never counted nor refused (a sentinel, a per-call answer)."""
        self._items.append(item)
        self._ready.set()

    def get(self, timeout: float | None = None) -> Any:
        """The next item (bytes, or what `put` queued), or EMPTY after `timeout` seconds."""
        while not self._items:
            self._ready.clear()
            if not self._ready.wait(timeout):
                return EMPTY if not self._items else self._get()
        return self._get()

    def _get(self) -> Any:
        item = self._items.popleft()
        if type(item) is bytes:
            self.queued -= len(item)
            self._figures["buffered"] -= len(item)
        return item

    def close(self) -> None:
        """Take nothing more and drop what waits (its memory released now); what is `put` after
        this is still delivered (a last event, a sentinel)."""
        self.closed = True
        self._items.clear()
        self._figures["buffered"] -= self.queued
        self.queued = 0


class WriterGate:
    """The policy of StreamBuffer over a writer that counts its own unsent bytes (troupe's stdout,
    a PipeWriter: its `queued`). `admit` says whether to write; a refusal of what cannot be
    dropped calls `on_overflow` once (the front then ends its client)."""

    __slots__ = ("limit", "_soft", "overflowed", "_on_overflow", "_figures")

    def __init__(self, limit: int, on_overflow: Callable[[], None], stats: StreamStats | None = None,
                 front: str = "stdio") -> None:
        self.limit, self._soft = limit, int(limit * NOTICE_SHARE)
        self.overflowed = False
        self._on_overflow = on_overflow
        self._figures = stats.of(front) if stats is not None else dict(_NO_FIGURES)

    def admit(self, queued: int, size: int, can_drop: str | None) -> bool:
        """True: write these `size` bytes (`queued` wait unsent already). False: dropped (and
        counted), or it did not fit and the consumer is being ended."""
        if self.overflowed:
            return False
        if can_drop:
            if queued + size > self._soft:
                self._figures[can_drop] += 1
                self._figures["bytes"] += size
                return False
        elif queued and queued + size > self.limit:
            self.overflowed = True
            self._figures["closed"] += 1
            self._on_overflow()
            return False
        return True


def shut_down_later(environ, grace: float = CLOSE_GRACE_S) -> gevent.Greenlet | None:
    """After `grace` s, shut the stream's socket down (kill the result if the stream ends first):
    a handler blocked writing to a client that reads nothing then fails and ends its stream.
    None when a host's own server serves us (no socket to reach)."""
    sock = environ.get(SOCKET_KEY)
    return None if sock is None else gevent.spawn_later(grace, _shut_down, sock)


def _shut_down(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # closed already: the stream is over anyway
        pass
