"""Workflow definitions: one `workflows:` entry or `workflows_dir` file read into a frozen
Workflow, its templates compiled, every problem named by file, line and key path."""
from __future__ import annotations

import re
from pathlib import Path
from types import MappingProxyType
from typing import Any, Callable

import jsonschema
import jsonschema.validators
import orjson

from actors.settings.files import ConfigError, Located, read
from actors.workflows import templating
from actors.workflows.model import TOOL_PREFIX, Step, Workflow
from actors.workflows.templating import TemplateProblem, Text

__all__ = ("TOOL_PREFIX", "Step", "Workflow", "parse", "load_file", "dir_files")  # the model, re-exported

NAME = re.compile(r"^[A-Za-z0-9_-]{1,55}$")  # so workflow_<name> stays within the 64 characters clients take
STEP_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")  # usable as steps.<id> in a template
ON_ERROR = ("stop", "continue")
FILE_SUFFIXES = (".yaml", ".yml", ".json")
_KEYS = {"name", "description", "input_schema", "steps", "output"}
_STEP_KEYS = {"id", "tool", "args", "when", "on_error", "parallel"}
_EMPTY_SCHEMA = {"type": "object", "properties": {}}

Fail = Callable[[str, str], None]  # (key path, message): the caller adds file and line


def parse(data: Any, path: str, loc: Located, fail: Fail, default_name: str | None = None) -> Workflow | None:
    """One definition at key `path` of `loc` (`""` for a file of its own); problems go to `fail`.
    None when it cannot be used at all."""
    def at(sub: str) -> str:
        return f"{path}.{sub}" if path else sub
    if not isinstance(data, dict):
        fail(path, "a workflow must be a mapping with name, steps and output")
        return None
    before = _Counter(fail)
    fail = before.fail
    for key in data:
        if key not in _KEYS:
            fail(at(str(key)), f"unknown key (allowed: {', '.join(sorted(_KEYS))})")
    name = data.get("name", default_name)
    if not isinstance(name, str) or not NAME.match(name):
        fail(at("name"), f"is required: letters, digits, _ and -, at most 55 ({name!r})" if name is not None
             else "is required")
        name = None
    description = data.get("description") or f"Workflow {name}: runs {len(data.get('steps') or [])} step(s)."
    if not isinstance(description, str):
        fail(at("description"), "must be a string")
    schema = _schema(data.get("input_schema"), at("input_schema"), fail)
    steps = _steps(data.get("steps"), at("steps"), loc, fail)
    output = None
    if data.get("output") is not None:
        output = _text(data["output"], at("output"), loc, fail)
    if output is not None:
        _check_references([output.source], {s.id for s in steps}, at("output"), fail, "")
    if before.count or name is None:
        return None
    return Workflow(name, str(description), MappingProxyType(schema), tuple(steps), output, loc.file,
                    loc.lines.get(path, 1) if path else 1, orjson.dumps(data, default=str))


def load_file(file: Path) -> tuple[Workflow | None, list[str]]:
    """One workflows_dir file (one workflow; its name defaults to the file's stem)."""
    try:
        loc = read(file)
    except ConfigError as exc:
        return None, list(exc.problems)
    problems: list[str] = []
    workflow = parse(loc.data, "", loc, lambda p, m: problems.append(f"{loc.where(p)}: {p or '(top)'}: {m}"),
                     default_name=file.stem)
    return workflow, problems


def dir_files(directory: str) -> list[Path]:
    """The workflow files of a directory, by name (hidden and editor backup files left out)."""
    try:
        entries = sorted(Path(directory).iterdir())
    except OSError:
        return []
    return [p for p in entries if p.suffix in FILE_SUFFIXES and not p.name.startswith(".") and p.is_file()]


class _Counter:
    """Counts the problems of one definition while passing them on."""

    def __init__(self, fail: Fail):
        self._fail, self.count = fail, 0

    def fail(self, path: str, message: str) -> None:
        self.count += 1
        self._fail(path, message)


def _schema(value: Any, path: str, fail: Fail) -> dict:
    if value is None:
        return dict(_EMPTY_SCHEMA)
    if not isinstance(value, dict):
        fail(path, "must be a JSON Schema mapping (type: object)")
        return dict(_EMPTY_SCHEMA)
    if value.get("type", "object") != "object":
        fail(f"{path}.type", "a tool's input schema must have type object")
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.SchemaError as exc:
        fail(path, f"not a valid JSON Schema: {exc.message}")
    return {"type": "object", **value}


def _steps(raw: Any, path: str, loc: Located, fail: Fail) -> list[Step]:
    if not isinstance(raw, list) or not raw:
        fail(path, "is required: a list of steps, each with id and tool")
        return []
    steps: list[Step] = []
    group_start = 0  # index of the first step of the current parallel group
    for i, item in enumerate(raw):
        spath = f"{path}[{i}]"
        if not isinstance(item, dict):
            fail(spath, "a step must be a mapping with id and tool")
            continue
        for key in item:
            if key not in _STEP_KEYS:
                fail(f"{spath}.{key}", f"unknown key (allowed: {', '.join(sorted(_STEP_KEYS))})")
        sid, tool = item.get("id"), item.get("tool")
        if not isinstance(sid, str) or not STEP_ID.match(sid):
            fail(f"{spath}.id", "is required: letters, digits and _, not starting with a digit"
                 if sid is None else f"{sid!r} must be letters, digits and _, not starting with a digit")
            sid = f"#{i}"
        elif any(s.id == sid for s in steps):
            fail(f"{spath}.id", f"duplicate step id {sid!r}")
        if not isinstance(tool, str) or not tool:
            fail(f"{spath}.tool", "is required: a tool's qualified name, as list_tools shows it")
            tool = ""
        elif tool.startswith(TOOL_PREFIX):
            fail(f"{spath}.tool", f"{tool!r}: a step cannot call a workflow")
        on_error = item.get("on_error", "stop")
        if on_error not in ON_ERROR:
            fail(f"{spath}.on_error", f"{on_error!r} is not one of {', '.join(ON_ERROR)}")
        parallel = item.get("parallel", False)
        if not isinstance(parallel, bool):
            fail(f"{spath}.parallel", "must be true or false")
            parallel = False
        if not (parallel and steps and steps[-1].parallel):
            group_start = len(steps)
        args_raw = item.get("args") or {}
        if not isinstance(args_raw, dict):
            fail(f"{spath}.args", "must be a mapping of argument names to values or templates")
            args_raw = {}
        args = _args(args_raw, f"{spath}.args", loc, fail)
        when = None
        if item.get("when") is not None:
            when = _text(item["when"] if isinstance(item["when"], str) else str(item["when"]), f"{spath}.when",
                         loc, fail)
        known = {s.id for s in steps[:group_start]}  # earlier steps; not those running beside it
        beside = {s.id for s in steps[group_start:]}
        for key, tree in args.items:
            _check_references(templating.sources(tree), known, f"{spath}.args.{key}", fail, sid, beside)
        if when is not None:
            _check_references([when.source], known, f"{spath}.when", fail, sid, beside)
        steps.append(Step(sid, tool, args, when, str(on_error), parallel, loc.lines.get(spath, 0)))
    return steps


def _args(raw: dict, path: str, loc: Located, fail: Fail) -> templating.ArgsMapping:
    compiled = {}
    for key, value in raw.items():
        try:
            compiled[key] = templating.compile_value(value)
        except TemplateProblem as exc:
            _template_failed(exc, f"{path}.{key}", loc, fail)
            compiled[key] = templating.Literal(value)
    return templating.ArgsMapping(tuple(compiled.items()))


def _text(value: Any, path: str, loc: Located, fail: Fail) -> Text | None:
    if not isinstance(value, str):
        fail(path, "must be a template string")
        return None
    try:
        return templating.compile_text(value)
    except TemplateProblem as exc:
        _template_failed(exc, path, loc, fail)
        return None


def _template_failed(exc: TemplateProblem, path: str, loc: Located, fail: Fail) -> None:
    # The key's line plus the line inside the template (a block scalar starts one line lower).
    where = f" (line {exc.line} of the template)" if exc.line and exc.line > 1 else ""
    fail(path, f"template does not parse{where}: {exc.message}")


def _check_references(sources: list[str], known: set, path: str, fail: Fail, own: str,
                      beside: set | None = None) -> None:
    for source in sources:
        for ref in sorted(templating.step_references(source) - known):
            if ref == own:
                fail(path, f"names its own step {ref!r}: a step sees only the steps before it")
            elif beside and ref in beside:
                fail(path, f"names step {ref!r}, which runs in parallel with it: its result is not there yet")
            else:
                fail(path, f"names step {ref!r}, which is not an earlier step of this workflow")
