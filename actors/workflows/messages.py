"""Messages to the WorkflowKeeper, and the bus event it publishes."""
from __future__ import annotations

from dataclasses import dataclass

from actors.events.kinds import Event


@dataclass(frozen=True, slots=True)
class FileRead:
    """One workflows_dir file as last read: its workflow, or None and the problems that stopped it."""

    file: str
    workflow: object  # definitions.Workflow | None
    problems: tuple = ()


@dataclass(frozen=True, slots=True)
class FilesRead:
    """Told by the dir watcher to the WorkflowKeeper: files changed (`read`) or gone (`gone`). No reply."""

    read: tuple = ()  # FileRead each
    gone: tuple = ()  # file paths


@dataclass(frozen=True, slots=True)
class ConfigWorkflows:
    """Told to the WorkflowKeeper when the config file was (re)loaded: its `workflows:` entries. No reply."""

    workflows: tuple = ()  # definitions.Workflow each


@dataclass(frozen=True, slots=True)
class WorkflowsChanged(Event):
    """Published by the WorkflowKeeper: the workflows served changed (`names` added, changed or removed)."""

    names: tuple = ()
    version: int = 0
