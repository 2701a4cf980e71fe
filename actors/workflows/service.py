"""WorkflowService: the wiring the Runtime holds (the box sessions read, the keeper that writes
it, the workflows_dir watcher), so the Runtime gains three lines, not a subsystem."""
from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger

from actors.tells import tell
from actors.workflows.keeper import WorkflowKeeper
from actors.published import Published
from actors.workflows.library import WorkflowSet
from actors.workflows.messages import ConfigWorkflows

if TYPE_CHECKING:
    from actors.workflows.watcher import DirWatcher


class WorkflowService:
    """Starts the WorkflowKeeper with the config's workflows and the workflows_dir files read
    once (so the first tools/list already has them), then watches the directory; `current` is
    the published WorkflowSet (the keeper alone gets its Publisher, at start)."""

    def __init__(self, config) -> None:
        self.box, self._writer = Published.create(WorkflowSet())
        self.directory: str | None = config.workflows_dir
        self._config_workflows = tuple(config.workflows)
        self.keeper = None
        self.watcher: DirWatcher | None = None

    @property
    def current(self) -> WorkflowSet:
        return self.box.current

    def start(self, bus) -> None:
        # The watcher's first look comes before the first read: a file changed between the two is
        # read again, never missed.
        watcher, files = None, ()
        if self.directory:  # the files' reader (Jinja2, jsonschema) loads only for a workflows_dir
            from actors.workflows.watcher import DirWatcher, read_all
            watcher = DirWatcher(self.directory)
            files = read_all(self.directory)
        writer, self._writer = self._writer, None  # handed over: nothing here can publish afterwards
        if writer is None:
            raise RuntimeError("the workflow service has started already")
        self.keeper = WorkflowKeeper.start(writer, bus, self._config_workflows, files)
        if watcher is not None:
            self.watcher = watcher.start(self.keeper)

    def config_changed(self, config) -> None:
        """The config file was reloaded: its `workflows:` apply now; a new workflows_dir at restart."""
        if self.keeper is not None:
            tell(self.keeper, ConfigWorkflows(tuple(config.workflows)))
        if config.workflows_dir != self.directory:
            logger.warning("config reload: workflows_dir changed; it applies when troupe restarts")

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        if self.keeper is not None:
            try:
                self.keeper.stop(timeout=2.0)
            except Exception:  # already gone, or stuck: the runtime's stop goes on
                pass
