"""The WorkflowSet snapshot (every workflow served now, and what failed to load) and its box."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from actors.workflows.model import TOOL_PREFIX, Workflow


@dataclass(frozen=True, slots=True)
class WorkflowSet:
    """Every workflow served now, by name, and the load problems to report (each naming file
    and line): a file that failed keeps its last good definition, listed in `stale`. Built by
    the WorkflowKeeper alone; sessions and core tools read it with no actor hop."""

    version: int = 0
    workflows: Mapping[str, Workflow] = field(default_factory=lambda: MappingProxyType({}))
    problems: tuple = ()
    stale: frozenset = frozenset()  # files whose last read failed; their earlier definitions serve on

    def by_tool(self, tool_name: str) -> Workflow | None:
        if not tool_name.startswith(TOOL_PREFIX):
            return None
        return self.workflows.get(tool_name[len(TOOL_PREFIX):])
