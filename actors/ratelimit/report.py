"""The rate limits as `troupe status` prints them, from the status report's `rates` section
(RateLimiter.report)."""
from __future__ import annotations


def line(rates) -> str:
    """One `rates:` line for `troupe status`: each bucket's limit, tokens left and refusals; empty
    without limits."""
    buckets = (rates or {}).get("buckets") if isinstance(rates, dict) else None
    if not buckets:
        return ""
    parts = []
    for b in buckets:
        limit, tokens = b.get("limit") or {}, b.get("tokens")
        left = "?" if tokens is None else f"{tokens:g}"
        unchecked = f", {b['fail_open']} unchecked" if b.get("fail_open") else ""
        parts.append(f"{b.get('scope')} {b.get('name')} {limit.get('per_minute')}/min burst {limit.get('burst')} "
                     f"({left} left, {b.get('refused', 0)} refused{unchecked})")
    shared = " [shared in Redis]" if rates.get("shared") else ""
    return "rates" + shared + ": " + "; ".join(parts)
