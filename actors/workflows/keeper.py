"""WorkflowKeeper actor: the only writer of the WorkflowSet (config's workflows plus the
workflows_dir files, the last good definition of each file kept when a new read fails)."""
from __future__ import annotations

from types import MappingProxyType

import pykka
from loguru import logger

from actors.workflows.model import Workflow
from actors.published import Publisher
from actors.workflows.library import WorkflowSet
from actors.workflows.messages import ConfigWorkflows, FileRead, FilesRead, WorkflowsChanged


class WorkflowKeeper(pykka.ThreadingActor):
    """Owns the config's workflows, each workflows_dir file's last good workflow and its current
    problems. Receives ConfigWorkflows (config loaded or reloaded) and FilesRead (from the dir
    watcher); publishes a new WorkflowSet into its box after each, and WorkflowsChanged on the
    bus when the served workflows changed. A broken file is logged with every problem and loses
    nothing: its earlier definition serves on until a good read replaces it."""

    def __init__(self, box: Publisher[WorkflowSet], bus, config_workflows: tuple = (), files: tuple = ()) -> None:
        super().__init__()
        self.box, self.bus = box, bus
        self._config: tuple = config_workflows
        self._good: dict[str, Workflow] = {}  # file → its last good workflow
        self._problems: dict[str, tuple] = {}  # file → what its last read found wrong
        self._version = 0
        for read in files:
            self._take(read)
        self._publish(announce=False)

    def on_receive(self, message):
        match message:
            case ConfigWorkflows(workflows=workflows):
                self._config = workflows
                self._publish()
            case FilesRead(read=read, gone=gone):
                for item in read:
                    self._take(item)
                for file in gone:
                    self._good.pop(file, None)
                    self._problems.pop(file, None)
                    logger.info("workflows: {} removed", file)
                self._publish()
            case _:
                logger.warning("workflow keeper: unknown message {!r}", message)

    def _take(self, read: FileRead) -> None:
        if read.problems:
            self._problems[read.file] = tuple(read.problems)
            kept = " (its last good definition serves on)" if read.file in self._good else ""
            logger.error("workflows: {} rejected{}, {} problem(s):", read.file, kept, len(read.problems))
            for problem in read.problems:
                logger.error("  {}", problem)
            return
        self._problems.pop(read.file, None)
        if isinstance(read.workflow, Workflow):
            self._good[read.file] = read.workflow
            logger.info("workflows: {} loaded (workflow {})", read.file, read.workflow.name)

    def _publish(self, announce: bool = True) -> None:
        before = self.box.current.workflows
        workflows: dict[str, Workflow] = {w.name: w for w in self._config}
        problems = [p for file in sorted(self._problems) for p in self._problems[file]]
        for file in sorted(self._good):
            workflow = self._good[file]
            first = workflows.get(workflow.name)
            if first is not None:  # config first, then files by name: the first keeps the name
                problems.append(f"{file}:{workflow.line}: workflow {workflow.name!r} is defined already "
                                f"in {first.source}:{first.line}; this one is ignored")
                continue
            workflows[workflow.name] = workflow
        self._version += 1
        self.box.publish(WorkflowSet(self._version, MappingProxyType(workflows), tuple(problems),
                                     frozenset(f for f in self._problems if f in self._good)))
        changed = tuple(sorted(n for n in set(before) | set(workflows)
                               if _written(before.get(n)) != _written(workflows.get(n))))
        if announce and changed and self.bus is not None:
            self.bus.publish(WorkflowsChanged(changed, self._version))


def _written(workflow: Workflow | None) -> tuple | None:
    return None if workflow is None else (workflow.source, workflow.written)
