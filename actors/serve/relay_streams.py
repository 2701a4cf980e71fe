"""The streamed answers of a relay (the owner's side of a call between instances), as SSE:

- a call whose request carries a progressToken: its progress notifications, then its answer
  (or its next input round);
- a `subscriptions/listen`: the relayed server's list changes and the updates of the resources it
  names, until the caller hangs up or this instance stops running the server.

A listen subscribes upstream through the server's own Connection, under an origin of its own, so
the Connection's subscription book keeps the union of every instance's and every local client's
URIs and the server hears one subscribe per URI however many follow it. The stream ends (and the
caller reopens it, now perhaps to a new owner) when the Connection it subscribed through is no
longer the server's: a restarted server has forgotten the subscriptions.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterator

import gevent
import gevent.queue
import orjson

from actors.events.kinds import ResourceUpdated
from actors.messages import CancelForward, Forward, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.serve import sse_framing as sse
from actors.serve.listener import watch_hangup
from actors.serve.relay_rounds import RelayCall, RelayRounds
from actors.tells import tell

OWNER_CHECK_S = 2.0  # how often a listen checks that it still subscribes through the server's Connection
_streams = itertools.count(1)
_HUNG_UP = object()
# Which catalogue lists each listen notice covers, and the notification that says so.
_NOTICES = {"tools": ("notifications/tools/list_changed", ("tools",)),
            "prompts": ("notifications/prompts/list_changed", ("prompts",)),
            "resources": ("notifications/resources/list_changed", ("resources", "templates"))}

Response = tuple[str, list, Any]


def answer(rid, outcome, *, method: str, list_ttl_ms: int) -> dict:
    """The JSON-RPC answer a relayed request gets for a Connection's outcome."""
    if isinstance(outcome, UpstreamError):
        return jsonrpc.error(rid, outcome.code, outcome.message, outcome.data)
    result = dict(outcome) if isinstance(outcome, dict) else {}
    if method in modern.CACHED_LISTS:
        result.setdefault("ttlMs", list_ttl_ms)
        result.setdefault("cacheScope", "public")
    result.setdefault("resultType", "complete")
    return jsonrpc.result(rid, result)


def progress_frames(environ, call: RelayCall, rounds: RelayRounds, deadline_s: float,
                    shape: Callable[[Any, Any], dict]) -> Iterator[bytes]:
    """The SSE answer of a call that asked for progress: each progress notice, then its answer
    (or its next input round). A caller that hangs up or a deadline that passes cancels the call."""
    hung_up = object()  # this request's own (see Relay._wait)
    watcher = watch_hangup(environ, lambda: call.queue.put(hung_up))
    deadline = time.monotonic() + deadline_s
    ended = False
    try:
        while True:
            if call.waiting and call.queue.empty():  # the server asks (or a retry left some unanswered)
                ended = True
                yield sse.event(rounds.park(call), name="message")
                return
            left = deadline - time.monotonic()
            if left <= 0:
                yield sse.event(shape(call.rid, UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"{call.server} gave no "
                                                              f"answer within {deadline_s:g}s", server=call.server)),
                                name="message")
                return
            try:
                item = call.queue.get(timeout=min(left, sse.KEEPALIVE_S))
            except gevent.queue.Empty:
                yield sse.comment()
                continue
            if item is hung_up:
                return
            if isinstance(item, dict):  # a progress notice
                yield sse.event(item, name="message")
                continue
            answered = call.take(item)
            if answered is not None:
                ended = True
                yield sse.event(shape(call.rid, answered.outcome), name="message")
                return
    finally:
        if watcher is not None:
            watcher.kill(block=False)
        if not ended:  # the caller left, or time ran out: the server stops working on it
            call.abandon("the calling instance went away")


def _urn(ref) -> str | None:
    return getattr(ref, "actor_urn", None)


class RelayListen:
    """One relayed `subscriptions/listen` for one server: subscribes its URIs through the server's
    Connection and turns this instance's bus events about that server into the stream's notices."""

    def __init__(self, runtime, ref, server: str, rid, asked: dict) -> None:
        self.rt, self.ref, self.server, self.rid = runtime, ref, server, rid
        self.kinds = {kind for key, kind in modern.LISTEN_KINDS.items() if asked.get(key)}
        uris = asked.get("resourceSubscriptions")
        self.uris = frozenset(u for u in uris if isinstance(u, str)) if isinstance(uris, list) else frozenset()
        self.origin = ("relay-listen", next(_streams))
        self.queue: gevent.queue.SimpleQueue = gevent.queue.SimpleQueue()

    def response(self, environ) -> Response:
        return "200 OK", list(sse.HEADERS), self._frames(environ)

    def _notice(self, method: str, params: dict | None = None) -> bytes:
        meta = {modern.META_SUBSCRIPTION: self.rid}
        return sse.event(jsonrpc.notification(method, {**(params or {}), "_meta": meta}), name="message")

    def _frames(self, environ) -> Iterator[bytes]:
        assert self.rt.bus is not None  # a relay serves only on a started runtime
        self.rt.bus.subscribe(self.origin, self.queue.put, ("ToolsChanged", "ResourceUpdated"))
        watcher = watch_hangup(environ, lambda: self.queue.put(_HUNG_UP))
        for uri in sorted(self.uris):
            tell(self.ref, Forward("resources/subscribe", {"uri": uri}, lambda outcome: None, origin=self.origin))
        prints = self._fingerprints()
        quiet_since = time.monotonic()
        try:
            yield self._notice(modern.ACKNOWLEDGED)
            while _urn(self.rt.connection(self.server)) == _urn(self.ref):
                try:
                    event = self.queue.get(timeout=OWNER_CHECK_S)
                except gevent.queue.Empty:
                    if time.monotonic() - quiet_since >= sse.KEEPALIVE_S:
                        quiet_since = time.monotonic()
                        yield sse.comment()
                    continue
                if event is _HUNG_UP:
                    return
                if isinstance(event, ResourceUpdated):
                    if event.server == self.server and event.uri in self.uris:
                        yield self._notice("notifications/resources/updated", {"uri": event.uri})
                    continue
                now = self._fingerprints()
                for kind in sorted(self.kinds):
                    if now[kind] != prints[kind]:
                        yield self._notice(_NOTICES[kind][0])
                prints = now
            # The server restarted or moved: the listen ends, and its caller opens a new one.
            yield sse.event(jsonrpc.result(self.rid, {"resultType": "complete"}), name="message")
        finally:
            self.rt.bus.unsubscribe(self.origin)
            if watcher is not None:
                watcher.kill(block=False)
            tell(self.ref, CancelForward(self.origin, None, "the listen stream ended"))  # drops its URIs

    def _fingerprints(self) -> dict[str, int]:
        """A digest per list kind of what this server contributes to the catalogue now."""
        cat = self.rt.catalogue()
        entries = {"tools": cat.tools, "prompts": cat.prompts, "resources": cat.resources + cat.templates}
        withheld = sorted((kind, name) for (kind, name), w in cat.withheld.items() if w.server == self.server)
        return {kind: hash(orjson.dumps([[e.original, e.definition] for e in entries[kind] if e.server == self.server]
                                        + [[k, n] for k, n in withheld if k in _NOTICES[kind][1]],
                                        default=dict))
                for kind in _NOTICES}
