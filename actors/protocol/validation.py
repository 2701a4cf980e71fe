"""Tool arguments checked against the tool's full inputSchema (jsonschema, compiled once).

A plain schema is checked by hand (_Quick), and jsonschema is imported only for one that needs
more, or for the precise message about arguments that failed: a run whose tools all have plain
schemas and whose clients send good arguments never loads it (tests/e2e/test_import_budget.py)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loguru import logger

from actors import optional_imports
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
# What the metaschema asks of each annotation, so a quick schema is a valid one without asking it.
_NOTE_TYPES = {"description": str, "title": str, "$comment": str, "$id": str, "examples": list,
               "deprecated": bool, "readOnly": bool, "writeOnly": bool}
# Dialects whose metaschema takes every quick schema (draft-04 wants `required` non-empty, say).
_DIALECTS = frozenset(u + end for u in ("http://json-schema.org/draft-06/schema", "http://json-schema.org/draft-07/schema",
                                        "https://json-schema.org/draft/2019-09/schema",
                                        "https://json-schema.org/draft/2020-12/schema") for end in ("", "#"))
_DIALECTS_DEFAULT = "https://json-schema.org/draft/2020-12/schema"  # MCP 2025-11-25's default
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

    __slots__ = ("_schema", "_full", "_types", "_required", "_closed")

    def __init__(self, schema: dict, types: dict, required: tuple, closed: bool):
        self._schema, self._types, self._required, self._closed = schema, types, required, closed
        self._full = None  # jsonschema's validator, built for the first arguments that fail

    def iter_errors(self, instance):
        if self._valid(instance):
            return iter(())
        if self._full is None:  # a pure function of the schema: two builders build the same one
            self._full = _full_validator(_jsonschema(), self._schema)
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


def _notes_valid(schema: Mapping) -> bool:
    return all(isinstance(schema[key], kind) for key, kind in _NOTE_TYPES.items() if key in schema)


def _quick(schema: dict) -> _Quick | None:
    """A _Quick when `schema` has only plain shapes, each as the metaschema allows it (so it needs
    no check_schema either), else None: jsonschema checks and validates it."""
    if schema.get("type") != "object" or schema.get("$schema", _DIALECTS_DEFAULT) not in _DIALECTS \
            or not _notes_valid(schema) \
            or not set(schema) <= _NOTES | {"type", "properties", "required", "additionalProperties"}:
        return None
    closed = schema.get("additionalProperties", True)
    properties, required = schema.get("properties", {}), schema.get("required", [])
    if not isinstance(closed, bool) or not isinstance(properties, Mapping) or not isinstance(required, list) \
            or not all(isinstance(r, str) for r in required) or len(set(required)) != len(required):
        return None
    types: dict = {}
    for name, sub in properties.items():
        if not isinstance(sub, Mapping) or "$schema" in sub or not _notes_valid(sub):
            return None
        check = _property_check(sub)
        if check is False:
            return None
        types[name] = check
    return _Quick(schema, types, tuple(required), not closed)


_BOUNDS = {"minimum": ("integer", "number"), "maximum": ("integer", "number"),
           "minLength": ("string",), "maxLength": ("string",)}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _property_check(sub: Mapping):
    """One property's check by hand: None (any value), a predicate, or False when the property
    needs jsonschema (a keyword the quick check does not know, or one used as no dialect allows)."""
    kind = sub.get("type")
    bounds = {k: sub[k] for k in _BOUNDS if k in sub}
    if not set(sub) <= _NOTES | {"type"} | set(bounds):
        return False
    if kind is None:
        return None if not bounds else False  # any value
    if not isinstance(kind, str) or kind not in _SHAPES:
        return False
    shape = _SHAPES[kind]
    if not bounds:
        return shape
    if any(kind not in _BOUNDS[k] for k in bounds):
        return False
    if kind == "string":  # lengths: whole numbers >= 0 (jsonschema counts code points, as len does)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in bounds.values()):
            return False
        low, high = bounds.get("minLength", 0), bounds.get("maxLength")
        return lambda v: isinstance(v, str) and len(v) >= low and (high is None or len(v) <= high)
    if not all(_number(v) for v in bounds.values()):
        return False
    low, high = bounds.get("minimum"), bounds.get("maximum")
    return lambda v: shape(v) and (low is None or v >= low) and (high is None or v <= high)


def _jsonschema():
    """jsonschema, imported off the hub the first time a schema or a failure needs it."""
    return optional_imports.load("jsonschema")


def _full_validator(jsonschema, schema: dict):
    # MCP 2025-11-25 makes 2020-12 the default dialect; a `$schema` (draft-07…) overrides it.
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=jsonschema.FormatChecker())


def compile_validator(tool: str, schema: Any):
    """A validator for one tool; a schema that is itself broken is not enforced (logged once)."""
    if not isinstance(schema, Mapping) or not schema:
        return ACCEPT_ALL
    schema = dict(schema)
    quick = _quick(schema)
    if quick is not None:
        return quick
    jsonschema = _jsonschema()
    try:
        jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
    except jsonschema.SchemaError as exc:
        logger.warning("tool {}: inputSchema is not a valid JSON Schema ({}); arguments not checked",
                       tool, exc.message[:200])
        return ACCEPT_ALL
    return _full_validator(jsonschema, schema)


def problems(validator, arguments: Any) -> str | None:
    """None if valid, else a message naming each failing value by its JSON Pointer and saying, in
    JSON terms, what is wrong with it (validation_text): the best match first, MAX_REPORTED at most."""
    errors = list(validator.iter_errors(arguments))
    if not errors:
        return None
    first = _jsonschema().exceptions.best_match(errors)
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
