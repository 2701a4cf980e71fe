"""Serving workflows: each as the tool `workflow_<name>` in a client's view of the catalogue
(so list_tools, filter_tools, describe_tool, call_tool and flat tools/list see it like any tool),
and the core tools core_workflow_list, core_workflow_get and core_workflow_validate."""
from __future__ import annotations

import fnmatch
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import orjson

from actors.catalogue.snapshot import Catalogue, Entry
from actors.downstream.metatools import MetaError, _tool
from actors.settings.files import Located
from actors import optional_imports
from actors.workflows.model import TOOL_PREFIX, Workflow
from actors.workflows.library import WorkflowSet

# The owner a workflow's Entry names: no server can have it (server names start with a letter
# or digit), so a workflow is never forwarded anywhere; the Session runs it (session_calls).
WORKFLOWS_SERVER = "(workflows)"

_NAME = {"name": {"type": "string", "description": "Workflow name (without the workflow_ prefix), as "
                                                   "core_workflow_list shows it."}}
CORE_TOOLS = (
    _tool("core_workflow_list", "List the workflows you can call (each served as the tool workflow_<name>): "
          "name, description, steps and the file that defines it; plus any file that failed to load.", {}),
    _tool("core_workflow_get", "Show one workflow's definition as written: input schema, steps and output "
          "template, and the file and line that define it.", _NAME, ("name",)),
    _tool("core_workflow_validate", "Check workflows against the tools you can call now: step tools exist, "
          "required arguments are given, templates parse and name only earlier steps. Problems name file "
          "and line. Give a workflow name, a definition to check before saving it, or nothing for all.",
          {**_NAME, "definition": {"type": "object", "description": "A workflow definition (name, input_schema, "
                                                                    "steps, output) to check."}}),
)
CORE_NAMES = frozenset(t["name"] for t in CORE_TOOLS)


def sees_workflow(profile, name: str) -> bool:
    """Like core tools, a workflow is shown to a profile that hides anything only when its allow
    list names it by a glob that starts with `workflow_` (a `*` meant for servers' tools does
    not), and no deny glob matches. Its steps run in that client's own view anyway."""
    if profile is None or profile.everything:
        return True
    return any(glob.startswith(TOOL_PREFIX) and fnmatch.fnmatchcase(name, glob) for glob in profile.allow) \
        and not any(fnmatch.fnmatchcase(name, glob) for glob in profile.deny)


def with_workflows(cat: Catalogue, workflows: WorkflowSet, profile) -> Catalogue:
    """`cat` (a client's view) plus the workflows that client sees, as tools owned by
    WORKFLOWS_SERVER. A new snapshot, pure and never stored into `cat`: it joins two owners'
    snapshots (the Registry's and the WorkflowKeeper's), so neither owner can build it, and the
    reader that needs it keeps it in its own state (ClientView keeps the last one)."""
    if not workflows.workflows:
        return cat
    return _add(cat, workflows, profile)


def _add(cat: Catalogue, workflows: WorkflowSet, profile) -> Catalogue:
    entries, collisions = [], []
    for name in sorted(workflows.workflows):
        workflow = workflows.workflows[name]
        if not sees_workflow(profile, workflow.tool_name):
            continue
        if workflow.tool_name in cat.tool_index:  # a server's tool got there first: it keeps the name
            collisions.append(f"workflow {name!r} not served: {cat.tool_index[workflow.tool_name].server} "
                              f"has a tool named {workflow.tool_name!r}")
            continue
        entries.append(Entry(workflow.tool_name, WORKFLOWS_SERVER, name, MappingProxyType(workflow.tool_definition())))
    if not entries and not collisions:
        return cat
    tools = cat.tools + tuple(entries)
    return replace(cat, tools=tools, tool_index=MappingProxyType({**cat.tool_index, **{e.name: e for e in entries}}),
                   tool_list=cat.tool_list + tuple(dict(e.definition) for e in entries),
                   collisions=cat.collisions + tuple(collisions), views=MappingProxyType({}))


# ---------------------------------------------------------------- core tools


def run_core(name: str, args: dict, workflows: WorkflowSet, view: Catalogue) -> Any:
    """One core_workflow_* tool for a client whose catalogue (workflows included) is `view`."""
    served = {e.original: workflows.workflows[e.original] for e in view.tools
              if e.server == WORKFLOWS_SERVER and e.original in workflows.workflows}
    if name == "core_workflow_list":
        return {"workflows": [{"name": w.name, "tool": w.tool_name, "description": w.description,
                               "steps": [s.id for s in w.steps], "source": f"{w.source}:{w.line}",
                               **({"stale": True} if w.source in workflows.stale else {})}
                              for w in served.values()],
                "problems": list(workflows.problems)}
    if name == "core_workflow_get":
        workflow = _find(args, served)
        return {"name": workflow.name, "tool": workflow.tool_name, "source": f"{workflow.source}:{workflow.line}",
                "input_schema": dict(workflow.input_schema), "definition": orjson.loads(workflow.written)}
    if name == "core_workflow_validate":
        return _validate(args, workflows, served, view)
    raise MetaError(f"unknown workflow tool {name!r}")


def _find(args: dict, served: dict) -> Workflow:
    """The workflow `args` names, by its name or its tool name."""
    value = args.get("name")
    if not isinstance(value, str) or not value:
        raise MetaError("argument 'name' is required (a workflow name; see core_workflow_list)")
    workflow = served.get(value) or (served.get(value[len(TOOL_PREFIX):]) if value.startswith(TOOL_PREFIX) else None)
    if workflow is None:
        raise MetaError(f"unknown workflow {value!r}; core_workflow_list shows the names")
    return workflow


def _validate(args: dict, workflows: WorkflowSet, served: dict, view: Catalogue) -> dict:
    problems: list[str] = []
    if isinstance(args.get("definition"), dict):
        data = args["definition"]
        loc = Located(data, {}, "<definition>")
        definitions = optional_imports.load("actors.workflows.definitions")  # Jinja2 and jsonschema
        workflow = definitions.parse(data, "", loc, lambda p, m: problems.append(f"<definition>: {p or '(top)'}: {m}"))
        checked = [workflow] if workflow is not None else []
    elif args.get("name") is not None:
        checked = [_find(args, served)]
    else:
        checked = list(served.values())
        problems += workflows.problems  # files that failed to load: their problems, with file and line
    for workflow in checked:
        problems += tool_problems(workflow, view)
    return {"valid": not problems, "checked": [w.name for w in checked], "problems": problems}


def tool_problems(workflow: Workflow, view: Catalogue) -> list[str]:
    """What the catalogue `view` says against a workflow's steps: tools missing (or withheld),
    required arguments not given."""
    out = []
    for step in workflow.steps:
        where = f"{workflow.source}:{step.line}: workflow {workflow.name}: step {step.id}"
        entry = view.tool(step.tool)
        if entry is None:
            held = view.withheld_tool(step.tool)
            out.append(f"{where}: {held.message()}" if held is not None else
                       f"{where}: unknown tool {step.tool!r} (not in the catalogue this client can call; "
                       f"list_tools shows the names)")
            continue
        required = (entry.definition.get("inputSchema") or {}).get("required") or ()
        given = {key for key, _ in step.args.items}
        missing = [key for key in required if key not in given]
        if missing:
            out.append(f"{where}: tool {step.tool} requires {', '.join(map(repr, missing))}, not in args")
    return out
