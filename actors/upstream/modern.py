"""What a Connection keeps only for a modern (2026-07-28) upstream: its one `subscriptions/listen`
stream, the re-listing of lists that carry `ttlMs` but no listChanged, and the x-mcp-header check
of its tools.

A plain object used only from its Connection's greenlet; its timers only tell the Connection
(ListenDue, RelistDue), so every change happens in the actor's own turn.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import gevent
from loguru import logger

from actors.messages import UpstreamError
from actors.protocol import header_params, modern_client

LISTEN_TIMEOUT = 3600.0  # a listen stream is renewed this often even when the server keeps it open
LISTEN_RETRY = (0.5, 30.0)  # backoff between attempts when the stream ends or is refused
MIN_RELIST = 5.0  # ttlMs below this is not polled faster: a ttl of 0 means "do not cache", not "hammer me"
RELIST_JITTER = 0.1  # up to 10% later, so upstreams with one ttl do not all re-list at once

# Which listChanged capability covers each list kind, and the listen filter key for it.
_KIND_CAPABILITY = {"tools": "tools", "resources": "resources", "templates": "resources", "prompts": "prompts"}
_LISTEN_KEYS = {"tools": "toolsListChanged", "resources": "resourcesListChanged", "prompts": "promptsListChanged"}


@dataclass(frozen=True, slots=True)
class ListenDue:
    """Told by a ModernUpstream timer to its Connection: (re)open the listen stream now."""

    epoch: int  # only the newest schedule counts


@dataclass(frozen=True, slots=True)
class RelistDue:
    """Told by a ModernUpstream timer to its Connection: re-read these lists, their ttl is up."""

    kinds: tuple


def has_list_changed(capabilities: dict, kind: str) -> bool:
    cap = capabilities.get(_KIND_CAPABILITY[kind])
    return isinstance(cap, dict) and bool(cap.get("listChanged"))


def valid_tools(tools: Iterable[dict], log=logger) -> tuple[tuple, dict[str, tuple]]:
    """(the tools a client may call over HTTP, name → their Mcp-Param-* map): the spec says a
    client must drop a tool whose x-mcp-header annotations are invalid."""
    kept, maps = [], {}
    for tool in tools:
        reason = header_params.invalid_annotation(tool.get("inputSchema"))
        if reason is not None:
            log.warning("dropping tool {!r}: invalid {} ({})", tool.get("name"), header_params.X_MCP_HEADER, reason)
            continue
        kept.append(tool)
        mapping = modern_client.header_map(tool.get("inputSchema"))
        if mapping and isinstance(tool.get("name"), str):
            maps[tool["name"]] = mapping
    return tuple(kept), maps


class ModernUpstream:
    """Owns one modern upstream's listen stream (its request id, what it asked for, the retry
    backoff) and its re-list timers. `request(method, params, on_reply, timeout)` sends through
    the Connection's table, `cancel(rid)` withdraws a request upstream, `tell(msg)` reaches the
    Connection's mailbox."""

    def __init__(self, request: Callable[..., Any], cancel: Callable[[Any], None], tell: Callable[[Any], None],
                 *, log=logger) -> None:
        self._request, self._cancel, self._tell, self._log = request, cancel, tell, log
        self._listening: Any = None  # the rid of the open listen request
        self._asked: dict | None = None  # the filter it was opened with
        self._epoch = 0
        self._failures = 0
        self._timers: list[gevent.Greenlet] = []
        self._relist_pending: set[str] = set()  # kinds with a re-list timer running: one each, never more
        self.closed = False

    def listen(self, capabilities: dict, uris: Iterable[str]) -> None:
        """Make the listen stream ask for exactly the list changes the server declares and these
        URIs' updates: opened, reopened with the new filter, or closed when there is nothing to hear."""
        if self.closed:
            return
        wanted: dict[str, Any] = {key: True for kind, key in _LISTEN_KEYS.items()
                                  if has_list_changed(capabilities, kind)}
        resources = capabilities.get("resources")
        subscribable = isinstance(resources, dict) and bool(resources.get("subscribe"))
        uris = sorted(set(uris)) if subscribable else []
        if uris:
            wanted["resourceSubscriptions"] = uris
        if wanted == self._asked and self._listening is not None:
            return
        self._close_stream()
        self._asked = wanted
        if not wanted:
            return
        rid_box: list = []

        def ended(outcome) -> None:
            if not rid_box or rid_box[0] != self._listening:
                return  # a stream replaced meanwhile
            self._listening = None
            self._failures += 1
            if isinstance(outcome, UpstreamError):
                self._log.debug("listen stream ended: {}", outcome.message)
            self._schedule_listen()

        rid_box.append(self._request(modern_client.LISTEN, {"notifications": wanted}, ended, LISTEN_TIMEOUT))
        self._listening = rid_box[0]

    def acknowledged(self) -> None:
        """The server acknowledged the stream: it works, so the retry backoff starts over."""
        self._failures = 0

    def listen_due(self, epoch: int) -> bool:
        """A retry timer fired; True if it is the newest and the stream should be reopened."""
        return epoch == self._epoch and not self.closed and self._listening is None

    def forget_filter(self) -> None:
        """Make the next listen() open a stream even with an unchanged filter."""
        self._asked = None

    def relist_after(self, kinds: Iterable[str], ttls: dict[str, Any], capabilities: dict) -> None:
        """Schedule a re-read of each kind the server cannot announce (no listChanged) by its ttlMs."""
        due: dict[float, list] = {}
        for kind in kinds:
            ttl = ttls.get(kind)
            usable = isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl >= 0
            if not usable or kind in self._relist_pending or has_list_changed(capabilities, kind):
                continue
            assert isinstance(ttl, (int, float))  # for the type checker: `usable` said so
            due.setdefault(max(ttl / 1000.0, MIN_RELIST), []).append(kind)
            self._relist_pending.add(kind)
        for delay, batch in due.items():
            self._later(delay * (1 + random.uniform(0, RELIST_JITTER)), RelistDue(tuple(batch)))

    def relist_due(self, kinds: Iterable[str]) -> tuple:
        """A re-list timer fired: these kinds are re-read now (and may be scheduled again)."""
        self._relist_pending.difference_update(kinds)
        return tuple(kinds)

    def close(self) -> None:
        """Stop every timer and the stream (the Connection is going)."""
        self.closed = True
        self._close_stream()
        for timer in self._timers:
            timer.kill(block=False)
        self._timers.clear()

    def _close_stream(self) -> None:
        if self._listening is not None:
            rid, self._listening = self._listening, None
            self._cancel(rid)

    def _schedule_listen(self) -> None:
        if self.closed:
            return
        self._epoch += 1
        low, high = LISTEN_RETRY
        delay = min(high, low * 2 ** min(self._failures, 10))
        self._asked = None  # reopen with whatever is wanted then
        self._later(delay, ListenDue(self._epoch))

    def _later(self, delay: float, message) -> None:
        self._timers = [t for t in self._timers if not t.dead]
        self._timers.append(gevent.spawn_later(delay, self._tell, message))
