"""Mixed into Session: a call of a workflow_<name> tool (its arguments already checked against
the workflow's input schema) becomes a Runner in its own greenlet."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from actors.catalogue import views
from actors.downstream.metatools import text_result
from actors.protocol import jsonrpc
from actors.workflows.definitions import TOOL_PREFIX
from actors.downstream.calls import CallDone, CallNotice
from actors.tells import tell
from actors.workflows.runner import Runner, WorkflowCancelled, workflow_deadline
from actors.workflows.tools import sees_workflow
from actors.workflows.messages import WorkflowsChanged

__all__ = ["WorkflowCalls", "WorkflowsChanged"]  # what the Session takes from here

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue, Entry
    from actors.downstream.listens import Listens
    from actors.runtime import Runtime


class WorkflowCalls:
    """The Session's workflow handler; keeps no state: each run is a tracked call of the Session's
    call table (its greenlet stopped with WorkflowCancelled on a cancel or the client's leaving)."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        mode: str
        actor_ref: object
        profile: views.Profile | None

        notify: Callable[[dict], None] | None
        initialized: bool
        listens: Listens

        def catalogue(self) -> Catalogue: ...
        def _track(self, rid, sink, shape, work, deadline: float, stop_with=None, method: str = "") -> int: ...

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
        me = self.actor_ref

        def run(call_token: int) -> None:
            def to_session(message) -> None:  # the runner's greenlet: its answer and notices go through the mailbox
                if isinstance(message, dict) and "method" in message:
                    tell(me, CallNotice(call_token, message))
                else:
                    tell(me, CallDone(call_token, message, answered=True))
            Runner(workflow, args, rid, to_session, token, me, self.mode, view, rt, principal).run()
        self._track(rid, sink, None, run, workflow_deadline(rt, workflow), stop_with=WorkflowCancelled,
                    method=entry.name)

    def _workflows_changed(self, names: tuple) -> None:
        """Workflows came, went or changed: in flat mode they are tools, so a client that sees
        any of them hears tools/list_changed (meta mode's tool list never changes)."""
        if self.mode != "flat" or not any(sees_workflow(self.profile, TOOL_PREFIX + name) for name in names):
            return
        self.listens.list_changed(["tools"])
        if self.notify is not None and self.initialized:
            self.notify(jsonrpc.notification("notifications/tools/list_changed"))
