"""Backpressure of a Connection: beyond max_in_flight a call waits its turn (FIFO), still
bounded by its own timeout; only a full queue is refused as busy.

A mixin of the Connection actor: these methods run in its greenlet and touch only its state.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from actors.messages import Forward, UpstreamError
from actors.protocol import jsonrpc
from actors.upstream.requests import never_sent

MIN_SEND_WINDOW = 0.1  # a queued call that gets its slot with less time left than this is answered, not sent


class Backpressure:
    """The waiting-line half of the Connection actor (mixed into it): queues, expires and
    releases calls through its WaitingLine as slots free up."""

    # What the Connection provides (declared for the type checker; set by Connection.__init__).
    config: Any
    log: Any
    stats: Any
    waiting: Any
    _failed: bool
    _dispatch: Callable[[Forward], None]

    def _wait_for_slot(self, fwd: Forward) -> None:
        if len(self.waiting) >= self.config.max_queued:
            fwd.on_reply(UpstreamError(jsonrpc.SERVER_UNAVAILABLE,
                                       f"server {self.config.name} is busy: {self.stats.in_flight} calls in "
                                       f"flight and {len(self.waiting)} waiting (max_queued "
                                       f"{self.config.max_queued}); retry later", server=self.config.name))
            return
        self.waiting.add(fwd, fwd.timeout or self.config.timeout)

    def _answer_waiting(self, why: str) -> None:
        """Empty the line (the connection stops or failed, `why`): its calls never left troupe, so
        each is answered as unsent and a FailoverFront or Session may send it on, run once."""
        unsent = never_sent(self.config.name, why)
        for fwd in self.waiting.clear():
            try:
                fwd.on_reply(unsent)
            except Exception:
                self.log.exception("reply handler failed")

    def _queue_timed_out(self, ticket: int) -> None:
        expired = self.waiting.expire(ticket)
        if expired is not None:
            self._answer_no_slot(*expired)

    def _answer_no_slot(self, fwd: Forward, timeout: float) -> None:
        fwd.on_reply(UpstreamError(jsonrpc.REQUEST_TIMEOUT,
                                   f"server {self.config.name} had no free slot within {timeout:g}s "
                                   f"({self.stats.in_flight} calls in flight, max_in_flight "
                                   f"{self.config.max_in_flight})", server=self.config.name))

    def _next_in_line(self) -> None:
        """A slot was freed: the longest-waiting call goes now."""
        while len(self.waiting) and self.stats.in_flight < self.config.max_in_flight and not self._failed:
            fwd, timeout, left = self.waiting.pop_oldest()
            if left < MIN_SEND_WINDOW:  # too late to be useful: the backend's work would only be cancelled
                self._answer_no_slot(fwd, timeout)
                continue
            self._dispatch(replace(fwd, timeout=left))

