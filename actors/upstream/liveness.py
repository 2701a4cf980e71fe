"""Slow, degraded or hung: what a Connection concludes from its server's timeouts in a row.

A few timeouts in a row show the server as degraded (and an answer shows it recovered);
`hung_after` of them send a ping, and a ping that goes unanswered too means the server is
wedged, so the Connection fails and the Supervisor restarts it.
"""
from __future__ import annotations

from typing import Callable

from loguru import logger

from actors.messages import ConnectionDegraded, UpstreamError
from actors.protocol import jsonrpc

DEGRADED_AFTER_TIMEOUTS = 3  # consecutive timeouts before the server shows as degraded
PING_TIMEOUT = 5.0  # the liveness ping after `hung_after` timeouts in a row (at most the server's timeout)


class Liveness:
    """Owns one Connection's count of timeouts in a row and whether a liveness ping is out.

    A plain object used only from its Connection's greenlet: `report` tells the Supervisor,
    `ping(on_reply, timeout)` sends a ping through the Connection's request table, `fail(reason)`
    fails the Connection. The requests troupe makes for itself (initialize, ping) never count.
    """

    def __init__(self, server: str, generation: int, hung_after: int, *, report: Callable[[object], object],
                 ping: Callable[[Callable, float], None], fail: Callable[[str], None], log=logger) -> None:
        self.server, self.generation = server, generation
        self._hung_after = hung_after  # timeouts in a row before a ping decides whether it is hung (0: never)
        self._report, self._ping, self._fail, self._log = report, ping, fail, log
        self.in_a_row = 0
        self._probing = False  # a liveness ping is out

    def timed_out(self, server_timeout: float, *, failed: bool) -> None:
        """One more client call went unanswered in time."""
        self.in_a_row += 1
        if self.in_a_row == DEGRADED_AFTER_TIMEOUTS:
            self._report(ConnectionDegraded(self.server, self.generation, False,
                                            f"{self.in_a_row} requests timed out in a row"))
        if self._hung_after and self.in_a_row >= self._hung_after:
            # Slow tools or a wedged server? A ping that also goes unanswered means wedged.
            if self._probing or failed:
                return
            self._probing = True
            wait = min(PING_TIMEOUT, server_timeout)
            self._ping(lambda outcome: self._pinged(outcome, wait), wait)

    def answered(self) -> None:
        """The server answered something (other than the liveness ping): not wedged, not degraded."""
        if self.in_a_row:
            if self.in_a_row >= DEGRADED_AFTER_TIMEOUTS:
                self._report(ConnectionDegraded(self.server, self.generation, True))
            self.in_a_row = 0

    def _pinged(self, outcome, wait: float) -> None:
        self._probing = False
        # a reply to anything else meanwhile reset the count: then it is not wedged either
        if isinstance(outcome, UpstreamError) and outcome.code == jsonrpc.REQUEST_TIMEOUT \
                and self.in_a_row >= self._hung_after:
            self._fail(f"hung: {self.in_a_row} requests timed out in a row and a ping got no "
                       f"answer within {wait:g}s")
        else:
            self._log.info("{} requests timed out in a row, but it answers ping: slow, not hung", self.in_a_row)
