"""Argument errors in JSON terms: each failing value named by its JSON Pointer and written as
JSON (null, true, "text", {"a": 1}), for every common rule, never as a Python repr."""
from __future__ import annotations

import itertools
import re

import pytest

from actors.protocol.validation import MAX_REPORTED, compile_validator, problems
from actors.protocol.validation_text import ROOT, json_text, pointer


def _obj(properties: dict, **more) -> dict:
    return {"type": "object", "properties": properties, **more}


def _says(schema: dict, arguments) -> str:
    message = problems(compile_validator("t", schema), arguments)
    assert message is not None, (schema, arguments)
    return message


CASES = [
    (_obj({"count": {"type": "integer"}}), {"count": None}, "/count: null is not of type 'integer'"),
    (_obj({"f": {"type": "boolean"}}), {"f": "yes"}, "/f: \"yes\" is not of type 'boolean'"),
    (_obj({"f": {"type": ["string", "null"]}}), {"f": True}, "/f: true is not of type 'string' or 'null'"),
    (_obj({"s": {"type": "string"}}), {"s": {"a": None, "b": [False, "x"]}},
     "/s: {\"a\":null,\"b\":[false,\"x\"]} is not of type 'string'"),
    (_obj({"n": {"type": "integer"}}, required=["n", "m"]), {}, "/n: required, but missing; /m: required, but missing"),
    (_obj({"o": _obj({"deep": {"type": "string"}}, required=["deep"])}), {"o": {}}, "/o/deep: required, but missing"),
    (_obj({"e": {"enum": ["a", "b", None]}}), {"e": "c"}, "/e: \"c\" is not one of [\"a\",\"b\",null]"),
    (_obj({"e": {"const": {"k": True}}}), {"e": False}, "/e: false is not the allowed value {\"k\":true}"),
    (_obj({"n": {"minimum": 1}}), {"n": 0}, "/n: 0 is less than the minimum of 1"),
    (_obj({"n": {"maximum": 1.5}}), {"n": 2}, "/n: 2 is more than the maximum of 1.5"),
    (_obj({"n": {"exclusiveMinimum": 0}}), {"n": 0}, "/n: 0 is not more than 0"),
    (_obj({"n": {"exclusiveMaximum": 3}}), {"n": 3}, "/n: 3 is not less than 3"),
    (_obj({"n": {"multipleOf": 2}}), {"n": 3}, "/n: 3 is not a multiple of 2"),
    (_obj({"s": {"minLength": 3}}), {"s": "ab"}, "/s: \"ab\" is shorter than 3 characters"),
    (_obj({"s": {"maxLength": 1}}), {"s": "ab"}, "/s: \"ab\" is longer than 1 character"),
    (_obj({"s": {"pattern": "^[a-z]+$"}}), {"s": "A'b\""}, "/s: \"A'b\\\"\" does not match the pattern \"^[a-z]+$\""),
    (_obj({"d": {"format": "date"}}), {"d": "yesterday"}, "/d: \"yesterday\" is not a valid 'date'"),
    (_obj({"a": {"type": "string"}}, additionalProperties=False), {"a": "x", "b/c~": None},
     "/b~1c~0: unexpected (the schema allows no other properties)"),
    (_obj({}, additionalProperties=False, patternProperties={"^x_": {}}), {"x_ok": 1, "y": 2},
     "/y: unexpected (the schema allows no other properties)"),
    (_obj({"a": {"items": {"type": "integer"}}}), {"a": [1, "2"]}, "/a/1: \"2\" is not of type 'integer'"),
    (_obj({"a": {"minItems": 2}}), {"a": [None]}, "/a: [null] has fewer than 2 items"),
    (_obj({"a": {"maxItems": 1}}), {"a": [1, 2]}, "/a: [1,2] has more than 1 item"),
    (_obj({"a": {"uniqueItems": True}}), {"a": [True, True]}, "/a: [true,true] has repeated items"),
    (_obj({"a": {"minProperties": 1}}), {"a": {}}, "/a: {} has fewer than 1 property"),
    (_obj({"a": {"maxProperties": 1}}), {"a": {"x": 1, "y": 2}}, "/a: {\"x\":1,\"y\":2} has more than 1 property"),
    (_obj({"a": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}), {"a": None},
     "/a: null matches none of the allowed shapes"),
    (_obj({"a": {"oneOf": [{"type": "integer"}, {"type": "number"}]}}), {"a": 1},
     "/a: 1 matches more than one of the allowed shapes (exactly one is allowed)"),
    (_obj({"a": {"not": {"type": "null"}}}), {"a": None}, "/a: null matches {\"type\":\"null\"}, which the schema forbids"),
    (_obj({"a": {"contains": {"type": "string"}}}), {"a": [1]}, "/a: [1] has no item matching {\"type\":\"string\"}"),
    (_obj({"a": False}), {"a": None}, f"{ROOT}: null is given for a property the schema forbids"),
    (_obj({"a": {"items": False}}), {"a": [None]}, "/a: [null] has items the schema does not allow"),
    (_obj({"a": {"properties": {"b": {"allOf": [False]}}}}), {"a": {"b": 1}}, "/a/b: 1 is not allowed here"),
    (_obj({"a": {"dependentRequired": {"x": ["y"]}}}), {"a": {"x": True}},
     "/a: {\"x\":true} lacks a property that another one requires: {\"x\":[\"y\"]}"),
]


@pytest.mark.parametrize("schema,arguments,expected", CASES)
def test_each_rule_is_told_in_json_terms(schema, arguments, expected):
    assert _says(schema, arguments) == expected


def test_an_unlisted_rule_falls_back_to_its_name_and_value_in_json():
    schema = {"type": "object", "properties": {"a": {"type": "array", "contains": {"const": None}, "minContains": 2}}}
    assert _says(schema, {"a": [None, 1]}) == "/a: [null,1] does not satisfy the schema's 'minContains' rule (2)"


PYTHON_WORDS = re.compile(r"\b(None|True|False)\b|\{'|\['|': ")


def test_no_python_repr_ever_shows():
    values = [None, True, False, {"k": None, "t": True}, [False, None, {"x": "y"}], "it's", 1.5, {}, []]
    schemas = [{"type": t} for t in ("integer", "string", "boolean", "object", "array", "null")] + [
        {"enum": [None, True, {"a": False}]}, {"const": [True]}, {"not": {"const": None}},
        {"anyOf": [{"type": "integer"}, {"enum": [False]}]}, {"minLength": 9}, {"maxItems": 0},
        {"minProperties": 5}, {"properties": {"k": {"type": "string"}}, "additionalProperties": False},
        {"required": ["missing"]}, {"propertyNames": {"maxLength": 0}}, {"if": {"type": "object"},
                                                                        "then": {"required": ["z"]}}]
    for sub, value in itertools.product(schemas, values):
        message = problems(compile_validator("t", _obj({"v": sub})), {"v": value})
        if message is not None:
            assert not PYTHON_WORDS.search(message), (sub, value, message)


def test_values_are_cut_and_pointers_escaped():
    long = "x" * 500
    assert json_text(long) == '"' + "x" * 78 + "…" and len(json_text(long)) == 80
    assert json_text(2 ** 70) == str(2 ** 70)  # beyond orjson's ints, still JSON
    assert pointer([]) == ROOT and pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"


def test_many_errors_are_listed_up_to_the_bound():
    schema = _obj({"a": {"items": {"type": "integer"}}})
    message = _says(schema, {"a": [None] * (MAX_REPORTED + 3)})
    assert message.count("null is not of type 'integer'") == MAX_REPORTED and message.endswith("; and 3 more")
