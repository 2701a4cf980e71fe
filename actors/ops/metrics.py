"""Prometheus families for the audit trail, from the audit section of the status report."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

COUNTERS = (("troupe_audit_records_written", "Audit records written to audit.file.", "written"),
            ("troupe_audit_records_dropped", "Audit records dropped because the writer's queue was full.",
             "dropped"),
            ("troupe_audit_records_failed", "Audit records lost to a failing write (disk full, say).", "failed"),
            ("troupe_audit_rotations", "Times audit.file was rotated.", "rotations"))


def families(audit: dict | None):
    """Nothing without an audit trail; else its counters and the queue's length and bound."""
    if not audit:
        return
    for name, text, key in COUNTERS:
        yield CounterMetricFamily(name, text, value=audit.get(key) or 0)
    yield GaugeMetricFamily("troupe_audit_queued", "Audit records waiting for the writer now.",
                            value=audit.get("queued") or 0)
    yield GaugeMetricFamily("troupe_audit_queue_max", "The writer's queue bound.", value=audit.get("queue_max") or 0)
