"""What a workflow is, once read: its Step and Workflow, with the names they are served and
called by. Apart from actors/workflows/definitions.py (which reads them, with Jinja2 and
jsonschema) so that what holds workflows imports no engine on a run that defines none."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # the compiled templates' type; templating itself imports Jinja2
    from actors.workflows.templating import Text

TOOL_PREFIX = "workflow_"  # a workflow is served as workflow_<name>
INTERNAL_ID = "troupe-workflow-"  # a workflow step's internal request ids: never a client's


@dataclass(frozen=True, slots=True)
class Step:
    """One step: call `tool` (a qualified name as clients see it) with `args` (a compiled
    template tree), if `when` renders true; `on_error` stop or continue; `parallel` runs it
    together with the parallel steps next to it."""

    id: str
    tool: str
    args: Any  # templating tree: Literal, Text, Expression, tuples and mappings of them
    when: Text | None = None
    on_error: str = "stop"
    parallel: bool = False
    line: int = 0


@dataclass(frozen=True, slots=True)
class Workflow:
    """A whole definition: served as the tool `workflow_<name>` with `input_schema`; `source` is
    the file (config or workflows_dir) and `line` where it starts; `written` is the definition
    as written (JSON bytes), for core_workflow_get."""

    name: str
    description: str
    input_schema: Mapping[str, Any]
    steps: tuple
    output: Text | None
    source: str
    line: int
    written: bytes

    @property
    def tool_name(self) -> str:
        return TOOL_PREFIX + self.name

    def groups(self) -> list[tuple]:
        """The steps in run order: adjacent `parallel: true` steps form one group, others run alone."""
        out: list[list] = []
        for step in self.steps:
            if step.parallel and out and out[-1][-1].parallel:
                out[-1].append(step)
            else:
                out.append([step])
        return [tuple(g) for g in out]

    def tool_definition(self) -> dict:
        """How the workflow is listed, like any tool."""
        return {"name": self.tool_name, "description": self.description, "inputSchema": dict(self.input_schema),
                "annotations": {"title": f"workflow {self.name}", "readOnlyHint": False, "openWorldHint": True}}
