"""Prometheus families for the response cache, from the cache section of the status report."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

# counters: (name, help, key in the report)
COUNTERS = (("troupe_cache_hits", "Calls answered from the cache.", "hits"),
            ("troupe_cache_misses", "Cacheable calls the cache could not answer (forwarded).", "misses"),
            ("troupe_cache_stores", "Results kept in the cache.", "stores"),
            ("troupe_cache_evictions", "Entries dropped to stay within cache.max_bytes.", "evictions"),
            ("troupe_cache_expired", "Entries found past their ttl.", "expired"),
            ("troupe_cache_invalidated", "Entries dropped because their server changed or restarted, "
                                         "or their resource was updated.", "invalidated"))
GAUGES = (("troupe_cache_entries", "Entries in the cache now.", "entries"),
          ("troupe_cache_bytes", "Bytes the cache holds now (encoded results).", "bytes"))


def families(cache: dict | None):
    """Each figure by server (label `server`; sum them for the whole cache), and the bound."""
    if not cache or "error" in cache:
        return
    servers = cache.get("servers") or {}
    for kind, table in ((CounterMetricFamily, COUNTERS), (GaugeMetricFamily, GAUGES)):
        for name, text, key in table:
            family = kind(name, text, labels=["server"])
            for server, counts in servers.items():
                family.add_metric([server], counts.get(key) or 0)
            yield family
    yield GaugeMetricFamily("troupe_cache_max_bytes", "The cache's bound (cache.max_bytes).",
                            value=cache.get("max_bytes") or 0)
