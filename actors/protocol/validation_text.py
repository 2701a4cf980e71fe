"""A failed argument check told in JSON terms: the JSON Pointer of the failing value and what is
wrong with it, values written as JSON (`null`, `true`, `"text"`, `{"a": 1}`), never as Python
reprs. Built from a jsonschema error's parts (validator, validator_value, instance,
absolute_path, schema), not from its `.message`, which jsonschema writes with `repr`."""
from __future__ import annotations

import json
import re
from typing import Any, Callable, Iterable

import orjson

ROOT = "(the arguments)"  # how the empty pointer (the whole arguments object) is shown
MAX_VALUE_CHARS = 80  # a value longer than this as JSON is cut: the model needs to recognise it, not reread it


def json_text(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """`value` as compact JSON, cut to `limit` characters (an ellipsis says so)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # beyond orjson (an int over 64 bits, say): the stdlib writes it, any leftover as text
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def pointer(path: Iterable) -> str:
    """RFC 6901 JSON Pointer of a path of keys and indexes (`~` and `/` escaped); ROOT for none."""
    parts = [str(p).replace("~", "~0").replace("/", "~1") for p in path]
    return "/" + "/".join(parts) if parts else ROOT


def _types(value: Any) -> str:
    names = value if isinstance(value, list) else [value]
    return " or ".join(f"'{n}'" for n in names)


def _count(n: Any, one: str, many: str) -> str:
    return f"{json_text(n)} {one if n == 1 else many}"


# One sentence per validator: (instance as JSON, validator_value, the error) -> what is wrong.
_SAYS: dict[str, Callable[[str, Any, Any], str]] = {
    "type": lambda j, v, e: f"{j} is not of type {_types(v)}",
    "enum": lambda j, v, e: f"{j} is not one of {json_text(v, 200)}",
    "const": lambda j, v, e: f"{j} is not the allowed value {json_text(v)}",
    "minimum": lambda j, v, e: f"{j} is less than the minimum of {json_text(v)}",
    "maximum": lambda j, v, e: f"{j} is more than the maximum of {json_text(v)}",
    "exclusiveMinimum": lambda j, v, e: f"{j} is not more than {json_text(v)}",
    "exclusiveMaximum": lambda j, v, e: f"{j} is not less than {json_text(v)}",
    "multipleOf": lambda j, v, e: f"{j} is not a multiple of {json_text(v)}",
    "minLength": lambda j, v, e: f"{j} is shorter than {_count(v, 'character', 'characters')}",
    "maxLength": lambda j, v, e: f"{j} is longer than {_count(v, 'character', 'characters')}",
    "pattern": lambda j, v, e: f"{j} does not match the pattern {json_text(v, 200)}",
    "format": lambda j, v, e: f"{j} is not a valid '{v}'",
    "minItems": lambda j, v, e: f"{j} has fewer than {_count(v, 'item', 'items')}",
    "maxItems": lambda j, v, e: f"{j} has more than {_count(v, 'item', 'items')}",
    "uniqueItems": lambda j, v, e: f"{j} has repeated items",
    "minProperties": lambda j, v, e: f"{j} has fewer than {_count(v, 'property', 'properties')}",
    "maxProperties": lambda j, v, e: f"{j} has more than {_count(v, 'property', 'properties')}",
    "contains": lambda j, v, e: f"{j} has no item matching {json_text(v)}",
    "not": lambda j, v, e: f"{j} matches {json_text(v)}, which the schema forbids",
    "anyOf": lambda j, v, e: f"{j} matches none of the allowed shapes",
    "oneOf": lambda j, v, e: f"{j} matches none of the allowed shapes" if e.context
    else f"{j} matches more than one of the allowed shapes (exactly one is allowed)",
    "unevaluatedProperties": lambda j, v, e: f"{j} has properties the schema does not allow",
    "unevaluatedItems": lambda j, v, e: f"{j} has items the schema does not allow",
    "items": lambda j, v, e: f"{j} has items the schema does not allow",  # `items: false` (after prefixItems)
    "additionalItems": lambda j, v, e: f"{j} has more items than the schema allows",
    "dependentRequired": lambda j, v, e: f"{j} lacks a property that another one requires: {json_text(v)}",
}


def lines(error) -> list[str]:
    """What one jsonschema ValidationError says, as "POINTER: sentence" lines (a `required` or
    `additionalProperties` error names each member it is about, at that member's own pointer)."""
    path = list(error.absolute_path)
    instance, value, validator = error.instance, error.validator_value, error.validator
    if validator == "required" and isinstance(instance, dict) and isinstance(value, list):
        missing = [name for name in value if isinstance(name, str) and name not in instance]
        if missing:
            return [f"{pointer([*path, name])}: required, but missing" for name in missing]
    if validator == "additionalProperties" and value is False and isinstance(instance, dict):
        extra = _unexpected(instance, error.schema)
        if extra:
            return [f"{pointer([*path, name])}: unexpected (the schema allows no other properties)" for name in extra]
    return [f"{pointer(path)}: {sentence(error)}"]


def sentence(error) -> str:
    """The sentence for one error, with a fallback that names the rule and its value in JSON."""
    shown = json_text(error.instance)
    validator = error.validator
    say = _SAYS.get(validator) if isinstance(validator, str) else None
    if say is not None:
        try:
            return say(shown, error.validator_value, error)
        except Exception:  # an odd validator_value (a schema troupe does not read): the plain form below
            pass
    if validator is None:  # a `false` subschema: nothing fits here
        schema_path = list(error.absolute_schema_path)
        if schema_path and schema_path[-1] == "properties":  # jsonschema loses the member's name here
            return f"{shown} is given for a property the schema forbids"
        return f"{shown} is not allowed here"
    return f"{shown} does not satisfy the schema's '{validator}' rule ({json_text(error.validator_value)})"


def _unexpected(instance: dict, schema: Any) -> list[str]:
    """The members of `instance` that neither `properties` nor `patternProperties` of `schema` name."""
    if not isinstance(schema, dict):
        return []
    named, patterns = schema.get("properties"), schema.get("patternProperties")
    named = named if isinstance(named, dict) else {}
    patterns = patterns if isinstance(patterns, dict) else {}
    extra = []
    for name in instance:
        if name in named:
            continue
        try:
            if any(re.search(p, name) for p in patterns):
                continue
        except re.error:
            pass
        extra.append(name)
    return extra
