"""A Session's call of a workflow_<name> tool (its arguments already checked against
the workflow's input schema) becomes a Runner in its own greenlet."""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.catalogue import views
from actors.downstream.metatools import text_result
from actors.protocol import jsonrpc
from actors.workflows.model import TOOL_PREFIX
from actors.downstream.calls import CallDone, CallNotice
from actors.tells import tell
from actors.workflows.tools import sees_workflow
from actors.workflows.messages import WorkflowsChanged

__all__ = ["WorkflowRequests", "WorkflowsChanged"]  # what the Session takes from here

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Entry
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.forwarder import Forwarder


class WorkflowRequests:
    """A Session's workflow calls. No state of its own: each run is a tracked call of the
    Session's call table (its greenlet stopped with WorkflowCancelled on a cancel or the client's
    leaving). A plain object used only from its Session's greenlet, with explicit inputs: the
    context, the Session's ref and mode, its client's view and its Forwarder."""

    def __init__(self, ctx: SessionContext, me, mode: str, view: ClientView, forwarder: Forwarder) -> None:
        self._ctx, self._me, self._mode, self._view, self._fw = ctx, me, mode, view, forwarder

    def run(self, rid, entry: Entry, args: dict, params: dict, sink) -> None:
        # The runner's templates are Jinja2's: loaded with the definition that defined this workflow.
        from actors.workflows.runner import Runner, WorkflowCancelled, workflow_deadline
        workflow = self._ctx.workflows().workflows.get(entry.original)
        if workflow is None:  # removed between the listing the client read and this call
            sink(jsonrpc.result(rid, text_result(f"workflow {entry.original!r} is no longer defined", is_error=True)))
            return
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        principal = getattr(sink, "principal", "") or ""
        ctx, profile = self._ctx, self._view.profile
        steps = ctx.tracing.steps(sink, workflow.name) if ctx.tracing is not None else None  # its steps' spans

        def view():  # the client's view now (published snapshots only), to name each step's server
            return views.view(ctx.catalogue(), profile)
        me = self._me

        def run(call_token: int) -> None:
            def to_session(message) -> None:  # the runner's greenlet: its answer and notices go through the mailbox
                if isinstance(message, dict) and "method" in message:
                    tell(me, CallNotice(call_token, message))
                else:
                    tell(me, CallDone(call_token, message, answered=True))
            Runner(workflow, args, rid, to_session, token, me, self._mode, view, ctx, principal, steps).run()
        self._fw.track(rid, sink, None, run, workflow_deadline(ctx, workflow), stop_with=WorkflowCancelled,
                       method=entry.name, audited=(entry.server, entry.original, args))

    def changed(self, names: tuple) -> bool:
        """Workflows came, went or changed: in flat mode they are tools, so the tool list of a
        client that sees any of them may have changed (True: the Session checks it with the
        catalogue's own changes; meta mode's tool list never changes)."""
        return self._mode == "flat" and any(sees_workflow(self._view.profile, TOOL_PREFIX + name) for name in names)
