"""The HTTP front's door at serve.max_connections: slow request heads go first.

A connection that has waited longer than a short grace for its request head (a slowloris
sending a byte a second, or an idle keep-alive socket) holds a slot and serves nobody. When
every slot is taken, a newcomer closes the one of these that has waited longest instead of
getting a 503; only when no connection has waited past the grace is the newcomer refused.
Both servers of troupe's front use it: lean_http's LeanServer and listener's FrontServer.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable, Protocol

SLOW_HEAD_GRACE_S = 1.0  # a head pending longer than this (or half of header_timeout, if shorter) is slow


class Cuttable(Protocol):
    """A connection the gate can end: `cut_head` makes its pending read end at once."""

    head_cut: bool

    def cut_head(self) -> None: ...


class HeadGate:
    """Owns the table of connections waiting for a request head, longest waiting first, of one
    server. Its server's handler greenlets call `waiting` and `done` around each head wait, and
    the accept callback calls `admit`; all in one thread, with no yield inside a call, and each
    call O(1). A cut connection counts as gone at once, though its greenlet ends a moment later.
    """

    __slots__ = ("max_connections", "grace", "cut", "refused", "_since", "_dying", "_clock")

    def __init__(self, max_connections: int, header_timeout: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_connections = max_connections
        self.grace = min(SLOW_HEAD_GRACE_S, header_timeout / 2)
        self.cut = 0  # slow heads closed to make room, since start
        self.refused = 0  # newcomers answered 503, since start
        self._since: OrderedDict[Cuttable, float] = OrderedDict()  # connection → when its head wait began
        self._dying = 0  # cut connections whose greenlet has not ended yet
        self._clock = clock

    def waiting(self, conn: Cuttable) -> None:
        """`conn` starts waiting for a request head (a new connection, or a keep-alive one between requests)."""
        self._since.pop(conn, None)
        self._since[conn] = self._clock()

    def done(self, conn: Cuttable) -> None:
        """`conn` has its head (or stopped waiting for one)."""
        self._since.pop(conn, None)

    def ended(self, conn: Cuttable) -> None:
        """`conn`'s greenlet is over."""
        self._since.pop(conn, None)
        if conn.head_cut:
            self._dying -= 1

    def admit(self, live: int) -> bool:
        """May a newcomer be served, `live` connection greenlets running? At the limit the slow
        head waiting longest is cut to make room; False (answer 503) when none is slow."""
        if live - self._dying < self.max_connections:
            return True
        oldest = next(iter(self._since.items()), None)
        if oldest is None or self._clock() - oldest[1] < self.grace:
            self.refused += 1
            return False
        conn = oldest[0]
        del self._since[conn]
        conn.head_cut = True
        self._dying += 1
        self.cut += 1
        conn.cut_head()
        return True

    def figures(self, live: int) -> dict:
        """The `connections` figure of GET /status."""
        return {"open": live - self._dying, "max": self.max_connections, "refused": self.refused,
                "waiting_for_head": len(self._since), "slow_heads_cut": self.cut}
