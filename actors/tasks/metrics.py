"""Prometheus families for tasks, from the tasks section of the status report (keeper.stats)."""
from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from actors.tasks import wire

KINDS = ("minted", "relayed")  # troupe's own tasks, and a server's passed through under sealed ids


def families(tasks: dict | None):
    """Tasks held now by state and kind, tasks created and calls refused since start, result bytes.
    Nothing when tasks are off or the keeper did not answer: no series rather than misleading zeros."""
    if not tasks or "error" in tasks:
        return
    held = GaugeMetricFamily("troupe_tasks", "Tasks troupe holds now, by state and kind (minted by troupe "
                             "or relayed from a server).", labels=["state", "kind"])
    by_kind = tasks.get("by_kind_state") or {}
    for kind in KINDS:
        counts = by_kind.get(kind) or {}
        for state in wire.STATES:
            held.add_metric([state, kind], counts.get(state) or 0)
    yield held
    created = CounterMetricFamily("troupe_tasks_created", "Tasks handed out since start, by kind.", labels=["kind"])
    for kind in KINDS:
        created.add_metric([kind], (tasks.get("created") or {}).get(kind) or 0)
    yield created
    refused = CounterMetricFamily("troupe_tasks_refused", "Task-capable calls refused, by reason "
                                  "(max_per_client: the client held serve.tasks.max_per_client live tasks).",
                                  labels=["reason"])
    refused.add_metric(["max_per_client"], tasks.get("refused_at_cap") or 0)
    yield refused
    yield GaugeMetricFamily("troupe_task_result_bytes", "Bytes of finished tasks' results and errors kept now.",
                            value=tasks.get("result_bytes") or 0)
    yield CounterMetricFamily("troupe_tasks_dropped_for_bytes", "Finished tasks dropped before their TTL to stay "
                              "within serve.tasks.max_bytes.", value=tasks.get("dropped_for_bytes") or 0)
    yield GaugeMetricFamily("troupe_tasks_max_per_client", "Live tasks one client may hold "
                            "(serve.tasks.max_per_client).", value=tasks.get("max_per_client") or 0)
