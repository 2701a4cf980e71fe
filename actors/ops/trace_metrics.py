"""Prometheus families for tracing, from the `tracing` section of the status report."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

COUNTERS = (("troupe_trace_spans_exported", "Spans the collector took.", "spans_exported"),
            ("troupe_trace_spans_dropped", "Spans dropped: their export failed (collector down or refusing) "
             "or the export queue was full.", "spans_dropped"),
            ("troupe_trace_export_failures", "Exports that failed (each drops its batch).", "export_failures"))


def families(tracing: dict | None):
    """Nothing when tracing is off."""
    if not tracing or "error" in tracing:
        return
    for name, text, key in COUNTERS:
        yield CounterMetricFamily(name, text, value=tracing.get(key) or 0)
    yield GaugeMetricFamily("troupe_trace_spans_queued", "Spans waiting for export now.",
                            value=tracing.get("spans_queued") or 0)
