"""Prometheus families for the rate limits, from the status report's `rates` section
(RateLimiter.report)."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

LABELS = ["scope", "name"]


def families(rates: dict | None):
    """Per bucket: calls refused, allowed and let through unchecked (Redis down) since start, the
    tokens left and the limit. Nothing without limits: no series rather than misleading zeros."""
    buckets = (rates or {}).get("buckets") or []
    if not buckets:
        return
    refused = CounterMetricFamily("troupe_rate_limited", "Calls refused by a rate limit, by the bucket "
                                  "that had no token.", labels=LABELS)
    allowed = CounterMetricFamily("troupe_rate_allowed", "Calls a rate limit let through.", labels=LABELS)
    fail_open = CounterMetricFamily("troupe_rate_fail_open", "Calls let through unchecked because the "
                                    "cluster's Redis did not answer the bucket check in time.", labels=LABELS)
    tokens = GaugeMetricFamily("troupe_rate_tokens", "Tokens left in the bucket (in a cluster: as Redis "
                               "last said).", labels=LABELS)
    per_minute = GaugeMetricFamily("troupe_rate_limit_per_minute", "The bucket's limit: calls per minute.",
                                   labels=LABELS)
    burst = GaugeMetricFamily("troupe_rate_limit_burst", "The bucket's limit: calls at once.", labels=LABELS)
    for bucket in buckets:
        labels = [str(bucket["scope"]), str(bucket["name"])]
        refused.add_metric(labels, bucket.get("refused") or 0)
        allowed.add_metric(labels, bucket.get("allowed") or 0)
        fail_open.add_metric(labels, bucket.get("fail_open") or 0)
        if bucket.get("tokens") is not None:
            tokens.add_metric(labels, bucket["tokens"])
        per_minute.add_metric(labels, bucket["limit"]["per_minute"])
        burst.add_metric(labels, bucket["limit"]["burst"])
    yield from (refused, allowed, fail_open, tokens, per_minute, burst)

