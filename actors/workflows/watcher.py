"""The workflows_dir watcher: a greenlet that polls the directory and tells the WorkflowKeeper
which files changed (parsed) or went away. Blocking file reads live here, never in an actor."""
from __future__ import annotations

import os
from pathlib import Path

import gevent

from actors.polling import Poller

from actors.tells import tell
from actors.workflows import definitions
from actors.workflows.messages import FileRead, FilesRead

POLL_S = 1.0
SETTLE_S = 0.2  # a file counts once it has not moved for this long (an editor truncates, then writes)
SETTLE_TRIES = 10


def read_all(directory: str) -> tuple:
    """Every workflow file of `directory`, parsed (FileRead each)."""
    return tuple(read_one(path) for path in definitions.dir_files(directory))


def dir_problems(directory: str, config_workflows: tuple = ()) -> tuple[list, list[str]]:
    """For `troupe check`: the workflows a directory adds to the config's, and every problem
    (file:line each, in line order per file; a name defined twice included)."""
    workflows, problems = list(config_workflows), []
    for read in read_all(directory):
        problems += sorted(read.problems, key=_line_of)
        workflow = read.workflow
        if isinstance(workflow, definitions.Workflow):
            first = next((w for w in workflows if w.name == workflow.name), None)
            if first is not None:
                problems.append(f"{read.file}:{workflow.line}: workflow {workflow.name!r} is defined already in "
                                f"{first.source}:{first.line}")
            else:
                workflows.append(workflow)
    return workflows, problems


def _line_of(problem: str) -> int:
    head = problem.split(": ", 1)[0]
    number = head.rsplit(":", 1)[-1]
    return int(number) if number.isdigit() else 0


def read_one(path: Path) -> FileRead:
    workflow, problems = definitions.load_file(path)
    return FileRead(str(path), workflow, tuple(problems))


class DirWatcher(Poller):
    """Polls `directory` every `interval` seconds; a file added, changed or removed since the
    last look is read once it holds still, and the keeper hears of it (FilesRead)."""

    def __init__(self, directory: str, interval: float = POLL_S):
        self.directory, self.interval = directory, interval
        self.keeper = None
        self._seen = self._stats()

    def start(self, keeper) -> "DirWatcher":
        self.keeper = keeper
        self._start_polling()
        return self

    def _stats(self) -> dict[str, tuple]:
        out = {}
        for path in definitions.dir_files(self.directory):
            try:
                st = os.stat(path)
            except OSError:
                continue
            out[str(path)] = (st.st_mtime_ns, st.st_size, st.st_ino)
        return out

    def check(self) -> bool:
        """One look: tell the keeper what changed; True if anything did."""
        now = self._stats()
        if now == self._seen:
            return False
        for _ in range(SETTLE_TRIES):
            gevent.sleep(SETTLE_S)
            again = self._stats()
            if again == now:
                break
            now = again
        changed = [Path(f) for f, stat in now.items() if self._seen.get(f) != stat]
        gone = tuple(f for f in self._seen if f not in now)
        self._seen = now
        if not changed and not gone:
            return False
        tell(self.keeper, FilesRead(tuple(read_one(p) for p in changed), gone))
        return True
