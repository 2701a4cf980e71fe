"""Mixed into Session: a call of a workflow_<name> tool (its arguments already checked against
the workflow's input schema) becomes a Runner in its own greenlet."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from actors.catalogue import views
from actors.downstream.metatools import text_result
from actors.protocol import jsonrpc
from actors.workflows.definitions import TOOL_PREFIX
from actors.workflows.runner import Runner
from actors.workflows.tools import sees_workflow
from actors.workflows.messages import WorkflowsChanged
from actors.workflows.runs import WorkflowRuns

__all__ = ["WorkflowCalls", "WorkflowRuns", "WorkflowsChanged"]  # what the Session takes from here

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue, Entry
    from actors.downstream.listens import Listens
    from actors.runtime import Runtime


class WorkflowCalls:
    """The Session's workflow handler; keeps no state but the Session's WorkflowRuns."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        mode: str
        actor_ref: object
        workflow_runs: WorkflowRuns
        profile: views.Profile | None

        notify: Callable[[dict], None] | None
        initialized: bool
        listens: Listens

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

    def _workflows_changed(self, names: tuple) -> None:
        """Workflows came, went or changed: in flat mode they are tools, so a client that sees
        any of them hears tools/list_changed (meta mode's tool list never changes)."""
        if self.mode != "flat" or not any(sees_workflow(self.profile, TOOL_PREFIX + name) for name in names):
            return
        self.listens.list_changed(["tools"])
        if self.notify is not None and self.initialized:
            self.notify(jsonrpc.notification("notifications/tools/list_changed"))
