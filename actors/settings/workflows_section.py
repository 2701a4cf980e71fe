"""The config's `workflows:` (definitions written in the config itself) and `workflows_dir:` (a
directory of one-workflow files, read and watched at run time, never here)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from actors.settings.files import Located


def parse(data: dict, loc: Located, fail: Callable[[str, str], None], expand: Callable[[str], str],
          base: Path) -> tuple[tuple, str | None]:
    """(the workflows written in the config, the workflows_dir as an absolute path or None)."""
    raw = data.get("workflows")
    workflows: list = []
    if raw is not None and not isinstance(raw, list):
        fail("workflows", "must be a list of workflow definitions")
        raw = None
    if raw:  # the engines (Jinja2, jsonschema) load only for a config that defines a workflow
        from actors.workflows import definitions
    for i, item in enumerate(raw or []):
        workflow = definitions.parse(item, f"workflows[{i}]", loc, fail)
        if workflow is None:
            continue
        if any(w.name == workflow.name for w in workflows):
            fail(f"workflows[{i}].name", f"duplicate workflow name {workflow.name!r}")
            continue
        workflows.append(workflow)
    directory = data.get("workflows_dir")
    if directory is None:
        return tuple(workflows), None
    if not isinstance(directory, str) or not directory:
        fail("workflows_dir", "must be a directory path")
        return tuple(workflows), None
    path = (base / os.path.expanduser(expand(directory))).resolve()
    if not path.is_dir():
        fail("workflows_dir", f"{str(path)!r} is not a directory")
    return tuple(workflows), str(path)
