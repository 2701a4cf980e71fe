"""Tool arguments checked against the tool's full inputSchema (jsonschema, compiled once)."""
from __future__ import annotations

from typing import Any, Mapping

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.validators import validator_for
from loguru import logger

from actors.protocol import validation_text

MAX_REPORTED = 5  # errors listed in one message; the model needs the first few, not all


class _AcceptAll:
    """The validator of a tool with no usable inputSchema: any arguments pass."""

    def iter_errors(self, instance):
        return iter(())


ACCEPT_ALL = _AcceptAll()

# Keywords that only annotate: they constrain nothing, so a schema made of them and of the plain
# shapes below can be checked without jsonschema.
_NOTES = frozenset({"description", "title", "default", "examples", "$comment", "deprecated", "readOnly",
                    "writeOnly", "$schema", "$id"})
_SHAPES = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
           "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
           "null": lambda v: v is None,
           # a float like 1.0 is an integer for some drafts and not others: jsonschema decides those
           "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
           "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}


class _Quick:
    """A plain object schema (typed properties, `required`, `additionalProperties: false` at most)
    checked by hand; only arguments that fail go to jsonschema, for its precise message. Most tools
    have such schemas, and jsonschema took ~7 µs of every call for them (issue 20's profile)."""

    __slots__ = ("_full", "_types", "_required", "_closed")

    def __init__(self, full, types: dict, required: tuple, closed: bool):
        self._full, self._types, self._required, self._closed = full, types, required, closed

    def iter_errors(self, instance):
        if self._valid(instance):
            return iter(())
        return self._full.iter_errors(instance)

    def _valid(self, instance) -> bool:
        if not isinstance(instance, dict):
            return False
        for name in self._required:
            if name not in instance:
                return False
        types = self._types
        for name, value in instance.items():
            check = types.get(name)
            if check is None:
                if self._closed and name not in types:
                    return False
            elif not check(value):
                return False
        return True


def _quick(schema: Mapping, full):
    """A _Quick over `full` when `schema` has only plain shapes, else `full` itself."""
    if schema.get("type") != "object" or not set(schema) <= _NOTES | {"type", "properties", "required",
                                                                       "additionalProperties"}:
        return full
    closed = schema.get("additionalProperties", True)
    properties, required = schema.get("properties", {}), schema.get("required", [])
    if not isinstance(closed, bool) or not isinstance(properties, Mapping) or not isinstance(required, list) \
            or not all(isinstance(r, str) for r in required):
        return full
    types: dict = {}
    for name, sub in properties.items():
        if not isinstance(sub, Mapping) or not set(sub) <= _NOTES | {"type"}:
            return full
        kind = sub.get("type")
        if kind is None:
            types[name] = None  # any value
        elif isinstance(kind, str) and kind in _SHAPES:
            types[name] = _SHAPES[kind]
        else:
            return full
    return _Quick(full, types, tuple(required), not closed)


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
    return _quick(schema, cls(schema, format_checker=FormatChecker()))


def problems(validator, arguments: Any) -> str | None:
    """None if valid, else a message naming each failing value by its JSON Pointer and saying, in
    JSON terms, what is wrong with it (validation_text): the best match first, MAX_REPORTED at most."""
    errors = list(validator.iter_errors(arguments))
    if not errors:
        return None
    first = best_match(errors)
    ordered = [first] + [e for e in errors if e is not first]
    lines: list[str] = []
    told = 0
    for err in ordered:
        if len(lines) >= MAX_REPORTED:
            break
        told += 1
        lines += [line for line in validation_text.lines(err) if line not in lines]
    left = len(lines) - MAX_REPORTED + len(errors) - told if len(lines) > MAX_REPORTED else len(errors) - told
    more = f"; and {left} more" if left > 0 else ""
    return "; ".join(line[:300] for line in lines[:MAX_REPORTED]) + more
