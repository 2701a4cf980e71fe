"""A token bucket: the arithmetic of one limit, no clock and no lock of its own (its owner,
the RateLimiter, passes the time and holds the lock)."""
from __future__ import annotations

from actors.settings.rate_section import Rate


class TokenBucket:
    """`rate.burst` tokens at most, `rate.per_second` of them back each second; a call takes one.
    Starts full, so an idle client may send a whole burst at once."""

    __slots__ = ("rate", "tokens", "stamp")

    def __init__(self, rate: Rate, now: float) -> None:
        self.rate, self.tokens, self.stamp = rate, float(rate.burst), now

    def refill(self, now: float) -> float:
        """The tokens there are at `now` (a clock that went back adds nothing)."""
        if now > self.stamp:
            self.tokens = min(float(self.rate.burst), self.tokens + (now - self.stamp) * self.rate.per_second)
            self.stamp = now
        return self.tokens

    def wait(self) -> float:
        """Seconds until a token is there (0: one is there now); call after refill."""
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / self.rate.per_second

    def take(self) -> None:
        self.tokens -= 1.0

    def limit(self, rate: Rate, now: float) -> None:
        """A reloaded limit from `now` on: what came back until now came at the old rate; the
        tokens held stay (at most the new burst) and refill at the new rate."""
        self.refill(now)
        self.rate, self.tokens = rate, min(self.tokens, float(rate.burst))
