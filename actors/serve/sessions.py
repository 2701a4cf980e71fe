"""The MCP sessions of one HTTP app: who is busy, idle expiry (serve.session_idle), the cap
(serve.max_sessions) and each client's quota (profiles.<name>.max_sessions, actors/serve/quotas.py)."""
from __future__ import annotations

import secrets
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

import gevent
import pykka
from loguru import logger

from actors.messages import ClientGone, ClientMessage
from actors.protocol import jsonrpc
from actors.downstream.session import Session
from actors.serve import quotas
from actors.serve.client_counts import ANONYMOUS
from actors.serve import sse_framing as sse
from actors.serve.stream_buffer import StreamBuffer, StreamStats, droppable
from actors.tells import tell

RETRY_AFTER_S = 5  # what a 503 at the session cap asks the client to wait before trying again
REAP_EVERY_MIN_S = 0.2  # the reaper looks for expired sessions every session_idle / 4, within these bounds
REAP_EVERY_MAX_S = 30.0
CLOSE = object()  # stream queue sentinel: end this stream


_ANY = object()  # close(): whichever client's session it is (troupe's own closing)


@dataclass(frozen=True, slots=True)
class Refused:
    """SessionTable.open found no room: `scope` is quotas.CLIENT_FULL (the client's own quota,
    every session of it busy) or quotas.FRONT_FULL (serve.max_sessions); `text` says which."""

    scope: str
    text: str


class HttpSession:
    """One downstream client over HTTP: its Session actor, its open server→client stream, its open POSTs.

    Busy while a request of it is in flight (`waiting`) or a stream of it is open; idle otherwise.
    Only its SessionTable changes `waiting`, `stream`, `last_seen` and `closed`, under the table's lock.
    """

    def __init__(self, runtime, legacy: bool, tag: str | None = None, client=None, on_failed=None,
                 streams: StreamStats | None = None):
        # In a cluster the id names its owner (`<tag>.<random>`) so any instance, or a load
        # balancer, can find it; token_urlsafe has no dot, so the first dot ends the tag.
        self.id = f"{tag}.{secrets.token_urlsafe(24)}" if tag else secrets.token_urlsafe(24)
        self.rt, self.legacy = runtime, legacy
        self.streams = streams  # the front's drop counters, for each stream this session opens
        self.stream: StreamBuffer | None = self.new_stream() if legacy else None
        self.last_seen = time.monotonic()  # when it last started or finished something
        self.waiting: dict[StreamBuffer, object] = {}  # open POSTs: their reply queue → request id
        self.closed = False
        self.client = client.name if client is not None else None  # its requests must come from it
        # A Session that fails answers the calls it holds; `on_failed(self, why)` then ends this
        # session at once (its open POSTs answered, its stream closed), never at a timeout.
        self.ref = Session.start(runtime, notify=self.notify, key=f"http-{self.id[-8:]}", client=client,
                                 on_failed=(lambda why: on_failed(self, why)) if on_failed is not None else None)

    @property
    def busy(self) -> bool:
        return bool(self.waiting) or self.stream is not None

    def send(self, message, sink) -> bool:
        """Hand one client message to the Session actor; False when the actor is gone."""
        try:
            self.ref.tell(ClientMessage(message, sink))
            return True
        except pykka.ActorDeadError:
            return False

    def new_stream(self) -> StreamBuffer:
        """A server→client stream's buffer: serve.stream_buffer_bytes of encoded events at most."""
        return StreamBuffer(self.rt.config.serve.stream_buffer_bytes, self.streams,
                            "legacy" if self.legacy else "session")

    def notify(self, message) -> None:
        """Unsolicited messages (list_changed…, a legacy session's answers) go on the open stream,
        if any, encoded here (the Session's greenlet); never broadcast. One that does not fit
        closes the stream (its buffer's on_overflow): a legacy session ends with it."""
        stream = self.stream
        if stream is not None:
            stream.offer(sse.event(message, name="message"), droppable(message))

    def _close(self, reason: str) -> None:
        self.closed = True
        tell(self.ref, ClientGone(reason))  # False: the Session stopped already; its calls are answered below
        if self.stream is not None:
            self.stream.close()  # what waits is released now, even if its reader never began
            self.stream.put(CLOSE)
        # The session's upstream calls are cancelled, so no answer will come for them:
        # every open POST gets one now instead of waiting out its reply timeout.
        waiting, self.waiting = self.waiting, {}
        for replies, rid in waiting.items():
            replies.put(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"session closed: {reason}"))


class SessionTable:
    """Owns the open HttpSessions of one app, least recently used first, in one table and in one
    per client (its serve.clients name, or None for the unnamed bucket).

    Handler greenlets and the reaper change the table and its sessions only inside these methods,
    under one lock, so "is it idle?" and "close it" cannot be split by a request starting in
    between. A busy session (a request in flight, or an open GET or SSE stream) is never expired
    or evicted: busy sessions hold a connection each, so serve.max_connections bounds them too.
    Room for a new session is made by quotas.make_room: never from another client's share.
    """

    def __init__(self, runtime, idle_s: float, max_sessions: int, quota: quotas.Quotas | None = None,
                 streams: StreamStats | None = None):
        self.rt, self.idle_s, self.max_sessions = runtime, idle_s, max_sessions
        self.quotas = quota or quotas.Quotas(lambda: runtime.config)
        self.streams = streams
        self._lock = threading.Lock()  # a gevent lock once patched; troupe refuses to run unpatched
        self._sessions: OrderedDict[str, HttpSession] = OrderedDict()
        self._by_client: dict[str | None, OrderedDict[str, HttpSession]] = {}  # the same sessions, by client
        self._counts = {"expired": 0, "evicted": 0, "refused": 0}  # since start, for GET /status
        self._evicted: Counter = Counter()  # by client name (ANONYMOUS for None): its sessions closed for room
        self._refused: Counter = Counter()  # by client name: its initializes refused
        self._reaper = gevent.spawn(self._reap)

    # ---------------------------------------------------------------- opening

    def open(self, legacy: bool, rid=None, tag: str | None = None,
             client=None) -> tuple[HttpSession, StreamBuffer | None] | Refused:
        """A new session, already busy: with the reply queue of its `initialize` (rid), or with its
        legacy SSE stream. At the client's quota its own least recently used idle session is closed
        to make room; at serve.max_sessions that of the client over its fair share (quotas.py).
        Refused when no idle session may go (the caller answers 429 or 503)."""
        key = client.name if client is not None else None
        with self._lock:
            self._expire(time.monotonic())
            quota, source = self.quotas.of(client)
            held = {k: len(v) for k, v in self._by_client.items()}
            room = quotas.make_room(key, held, quota, self.max_sessions, self._oldest_idle)
            if room.refused is not None:
                self._counts["refused"] += 1
                self._refused[key or ANONYMOUS] += 1
                if room.refused == quotas.CLIENT_FULL:
                    return Refused(room.refused, quotas.refusal_text(client, held.get(key, 0), quota, source))
                return Refused(room.refused, f"troupe holds {self.max_sessions} sessions (serve.max_sessions) "
                                             f"and none that may make room is idle; retry later")
            if room.evict is not None:
                assert isinstance(room.evict, HttpSession)
                self._counts["evicted"] += 1
                self._evicted[room.evict_from or ANONYMOUS] += 1
                why = source if room.evict_from == key and held.get(key, 0) >= quota else "serve.max_sessions"
                logger.debug("http: closing the least recently used idle session of {} to make room ({})",
                             room.evict_from or ANONYMOUS, why)
                self._drop(room.evict, f"closed to make room for a new session ({why})")
            # Started under the lock (a short yield) so that two initializes cannot both pass the cap.
            hs = HttpSession(self.rt, legacy, tag, client, on_failed=self._failed, streams=self.streams)
            self._sessions[hs.id] = hs
            self._by_client.setdefault(key, OrderedDict())[hs.id] = hs
            replies = None if legacy else self._expect(hs, rid)
            return hs, replies

    # ---------------------------------------------------------------- requests

    def acquire(self, sid: str, rid, legacy: bool = False,
                client=None) -> tuple[HttpSession, StreamBuffer] | None:
        """The live session `sid`, now busy with request `rid` until `release`; None if unknown,
        expired, or another client's."""
        with self._lock:
            hs = self._live(sid, legacy, client)
            return None if hs is None else (hs, self._expect(hs, rid))

    def release(self, hs: HttpSession, replies: StreamBuffer) -> None:
        """The request is answered (or its client gone): the session's idle clock starts again."""
        with self._lock:
            hs.waiting.pop(replies, None)
            self._touch(hs)

    def touch(self, sid: str, legacy: bool = False, client=None) -> HttpSession | None:
        """The live session `sid`, marked used now (for messages that expect no answer on this request)."""
        with self._lock:
            return self._live(sid, legacy, client)

    def open_stream(self, sid: str, client=None) -> tuple[HttpSession, StreamBuffer] | None:
        """A GET stream for Streamable session `sid`; the newest stream wins (the previous one ends)."""
        with self._lock:
            hs = self._live(sid, False, client)
            if hs is None:
                return None
            if hs.stream is not None:
                hs.stream.close()
                hs.stream.put(CLOSE)
            stream = hs.stream = hs.new_stream()
            return hs, stream

    def stream_ended(self, hs: HttpSession, stream: StreamBuffer) -> None:
        """A stream ended: a legacy session ends with it, a Streamable one turns idle."""
        with self._lock:
            if hs.legacy:
                if not hs.closed:
                    self._drop(hs, "SSE stream closed")
                return
            if hs.stream is stream:
                hs.stream = None
            self._touch(hs)

    def _failed(self, hs: HttpSession, why: str) -> None:
        """Its Session actor failed (told from that actor's greenlet, which must not wait on this
        table's lock): the session ends in a greenlet of its own."""
        logger.error("http: session {} ended: {}", hs.id[-8:], why)
        gevent.spawn(self.gone, hs, why)

    def gone(self, hs: HttpSession, reason: str) -> None:
        """Its Session actor died (a tell failed): forget the session, answer what waits on it."""
        with self._lock:
            if not hs.closed:
                self._drop(hs, reason)

    # ---------------------------------------------------------------- closing

    def close(self, sid: str, reason: str, legacy: bool | None = None, client: Any = _ANY) -> bool:
        """End session `sid` (only `client`'s, when given); False if there is no such session."""
        with self._lock:
            hs = self._sessions.get(sid)
            if hs is None or (legacy is not None and hs.legacy != legacy) \
                    or (client is not _ANY and hs.client != (client.name if client is not None else None)):
                return False
            self._drop(hs, reason)
            return True

    def close_all(self, reason: str) -> list:
        """Stop the reaper and close every session; returns their actor refs (to wait for)."""
        self._reaper.kill(block=False)
        with self._lock:
            sessions = list(self._sessions.values())
            for hs in sessions:
                self._drop(hs, reason)
        return [hs.ref for hs in sessions]

    def refs(self) -> list:
        with self._lock:
            return [hs.ref for hs in self._sessions.values()]

    def by_client(self) -> dict[str, int]:
        """Open sessions by client name (`-` for those that named none)."""
        with self._lock:
            return {key or ANONYMOUS: len(held) for key, held in self._by_client.items()}

    def quota_figures(self) -> dict[str, dict]:
        """By client name: its sessions closed to make room (`evicted`) and its initializes refused
        (`refused`) since start; only clients with either."""
        with self._lock:
            return {name: {"evicted": self._evicted[name], "refused": self._refused[name]}
                    for name in {*self._evicted, *self._refused}}

    def summary(self) -> dict:
        """The `sessions` figure of GET /status."""
        with self._lock:
            values, counts = list(self._sessions.values()), dict(self._counts)
            return {"open": len(values), "busy": sum(hs.busy for hs in values),
                    "legacy": sum(hs.legacy for hs in values), "max": self.max_sessions, "idle_s": self.idle_s,
                    **counts}

    # ---------------------------------------------------------------- under the lock

    def _live(self, sid: str, legacy: bool, client) -> HttpSession | None:
        hs = self._sessions.get(sid)
        # Another client's session is as unknown as a made-up id: one client never reaches another's.
        if hs is None or hs.legacy != legacy or hs.client != (client.name if client is not None else None):
            return None
        if not hs.busy and time.monotonic() - hs.last_seen > self.idle_s:
            self._counts["expired"] += 1
            self._drop(hs, "idle session expired")  # the reaper had not come round to it yet
            return None
        self._touch(hs)
        return hs

    def _expect(self, hs: HttpSession, rid) -> StreamBuffer:
        # One POST's messages ahead of its answer (SSE replies only), serve.stream_buffer_bytes at most.
        replies = StreamBuffer(self.rt.config.serve.stream_buffer_bytes, self.streams, "post")
        hs.waiting[replies] = rid
        self._touch(hs)
        return replies

    def _touch(self, hs: HttpSession) -> None:
        hs.last_seen = time.monotonic()
        if hs.id in self._sessions:
            self._sessions.move_to_end(hs.id)
            self._by_client[hs.client].move_to_end(hs.id)

    def _drop(self, hs: HttpSession, reason: str) -> None:
        if self._sessions.pop(hs.id, None) is not None:
            held = self._by_client[hs.client]
            del held[hs.id]
            if not held:
                del self._by_client[hs.client]
        hs._close(reason)

    def _oldest_idle(self, key: str | None) -> HttpSession | None:
        """Client `key`'s least recently used idle session, if any."""
        return next((hs for hs in self._by_client.get(key, {}).values() if not hs.busy), None)

    def _expire(self, now: float) -> None:
        # Least recently used first, so the sessions seen within idle_s end the walk.
        expired = []
        for hs in self._sessions.values():
            if now - hs.last_seen <= self.idle_s:
                break
            if not hs.busy:
                expired.append(hs)
        for hs in expired:
            self._drop(hs, "idle session expired")
        if expired:
            self._counts["expired"] += len(expired)
            logger.debug("http: {} idle session(s) expired", len(expired))

    def _reap(self) -> None:
        every = min(max(self.idle_s / 4, REAP_EVERY_MIN_S), REAP_EVERY_MAX_S)
        while True:
            gevent.sleep(every)
            try:
                with self._lock:
                    self._expire(time.monotonic())
            except Exception:  # keep reaping: one bad close must not leave every later session immortal
                logger.exception("http: expiring idle sessions failed")
