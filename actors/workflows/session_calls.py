"""Mixed into Session: a call of a workflow_<name> tool (its arguments already checked against
the workflow's input schema) becomes a Runner in its own greenlet."""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.catalogue import views
from actors.downstream.metatools import text_result
from actors.protocol import jsonrpc
from actors.workflows.runner import Runner
from actors.workflows.runs import WorkflowRuns

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue, Entry
    from actors.runtime import Runtime


class WorkflowCalls:
    """The Session's workflow handler; keeps no state but the Session's WorkflowRuns."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        mode: str
        actor_ref: object
        workflow_runs: WorkflowRuns
        profile: views.Profile | None

        def catalogue(self) -> Catalogue: ...

    def _run_workflow(self, rid, entry: Entry, args: dict, params: dict, sink) -> None:
        workflow = self.rt.workflows.current.workflows.get(entry.original)
        if workflow is None:  # removed between the listing the client read and this call
            sink(jsonrpc.result(rid, text_result(f"workflow {entry.original!r} is no longer defined", is_error=True)))
            return
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        principal = getattr(sink, "principal", "") or ""
        rt, profile = self.rt, self.profile

        def view():  # the client's view now (published snapshots only), to name each step's server
            return views.view(rt.catalogue(), profile)
        self.workflow_runs.start(rid, Runner(workflow, args, rid, sink, token, self.actor_ref, self.mode,
                                             view, self.rt, principal))
