"""The workflow calls one Session is running: each one's runner greenlet, by the client's request id."""
from __future__ import annotations

import gevent

from actors.workflows.runner import Runner, WorkflowCancelled


class WorkflowRuns:
    """Held by a Session and used only from its greenlet: starts a Runner's greenlet per workflow
    call, and on the client's cancel (or its leaving) stops it with WorkflowCancelled; the runner
    itself then cancels the steps it awaits. A finished run is dropped at the next start."""

    def __init__(self) -> None:
        self._runs: dict = {}  # client request id → the runner's greenlet

    def __len__(self) -> int:
        return sum(1 for g in self._runs.values() if not g.dead)

    def start(self, rid, runner: Runner) -> None:
        self._runs = {r: g for r, g in self._runs.items() if not g.dead}
        self._runs[rid] = gevent.spawn(runner.run)

    def cancel(self, rid, reason: str) -> bool:
        """Stop the run answering `rid`; False when there is none (or it has finished)."""
        greenlet = self._runs.pop(rid, None) if isinstance(rid, (str, int)) else None
        if greenlet is None or greenlet.dead:
            return False
        greenlet.kill(WorkflowCancelled(reason), block=False)
        return True

    def close(self, reason: str) -> None:
        runs, self._runs = self._runs, {}
        for greenlet in runs.values():
            if not greenlet.dead:
                greenlet.kill(WorkflowCancelled(reason), block=False)
