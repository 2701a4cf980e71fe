"""Tool arguments checked against the tool's full inputSchema (jsonschema, compiled once)."""
from __future__ import annotations

from typing import Any, Mapping

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.validators import validator_for
from loguru import logger

MAX_REPORTED = 5  # errors listed in one message; the model needs the first few, not all


class _AcceptAll:
    """The validator of a tool with no usable inputSchema: any arguments pass."""

    def iter_errors(self, instance):
        return iter(())


ACCEPT_ALL = _AcceptAll()


def compile_validator(tool: str, schema: Any):
    """A validator for one tool; a schema that is itself broken is not enforced (logged once)."""
    if not isinstance(schema, Mapping) or not schema:
        return ACCEPT_ALL
    schema = dict(schema)
    # MCP 2025-11-25 makes 2020-12 the default dialect; a `$schema` (draft-07…) overrides it.
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        logger.warning("tool {}: inputSchema is not a valid JSON Schema ({}); arguments not checked",
                       tool, exc.message[:200])
        return ACCEPT_ALL
    return cls(schema, format_checker=FormatChecker())


def problems(validator, arguments: Any) -> str | None:
    """None if valid, else a message naming each failing path and rule."""
    errors = list(validator.iter_errors(arguments))
    if not errors:
        return None
    first = best_match(errors)
    ordered = [first] + [e for e in errors if e is not first]
    lines = []
    for err in ordered[:MAX_REPORTED]:
        path = err.json_path if err.json_path != "$" else "$ (the arguments object)"
        lines.append(f"at {path}: {err.message[:300]} (rule: {err.validator})")
    more = f"; and {len(errors) - MAX_REPORTED} more" if len(errors) > MAX_REPORTED else ""
    return "; ".join(lines) + more
