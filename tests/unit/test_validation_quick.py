"""The hand check of plain object schemas (issue 20) agrees with jsonschema on every verdict."""
from __future__ import annotations

import itertools

from jsonschema import Draft7Validator, Draft202012Validator

from actors.protocol import validation
from actors.protocol.validation import _Quick, compile_validator, problems

PLAIN = [
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    {"type": "object", "properties": {}},
    {"type": "object", "properties": {"n": {"type": "integer", "description": "count"},
                                      "x": {"type": "number"}, "b": {"type": "boolean"},
                                      "a": {"type": "array"}, "o": {"type": "object"}, "z": {"type": "null"},
                                      "any": {"title": "anything"}},
     "required": ["n"], "additionalProperties": False, "title": "t", "$schema": "http://json-schema.org/draft-07/schema#"},
    {"type": "object", "additionalProperties": False},
    # bounds the quick check knows (the bundled workspace server's schemas use them)
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 5},
                                      "s": {"type": "string", "minLength": 1, "maxLength": 3},
                                      "x": {"type": "number", "minimum": 0.5}}},
]
NOT_PLAIN = [
    {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}},
    {"type": "object", "properties": {"s": {"type": ["string", "null"]}}},
    {"type": "object", "properties": {"s": {"enum": ["a"]}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"d": {"type": "string", "format": "date"}}},
    {"properties": {"s": {"type": "string"}}},
    {"type": "object", "properties": {"n": {"type": "integer", "minLength": 1}}},
    {"type": "object", "properties": {"s": {"type": "string", "minLength": -1}}},
    {"type": "object", "properties": {"n": {"type": "integer", "minimum": True}}},
    {"type": "object", "properties": {"n": {"minimum": 1}}},
    # not valid JSON Schema: jsonschema says so (and the arguments go unchecked, as before)
    {"type": "object", "required": ["a", "a"]},
    {"type": "object", "description": 3},
    {"type": "object", "$schema": "http://json-schema.org/draft-04/schema#", "required": []},
]
INSTANCES = [{}, {"text": "hi"}, {"text": 3}, {"n": 1}, {"n": 1.0}, {"n": True}, {"n": 1, "x": 2.5},
             {"n": 1, "x": "2"}, {"n": 1, "b": 0}, {"n": 1, "b": False}, {"n": 1, "a": []}, {"n": 1, "a": {}},
             {"n": 1, "o": {}}, {"n": 1, "z": None}, {"n": 1, "z": 0}, {"n": 1, "any": [1]}, {"n": 1, "extra": 1},
             {"s": "a"}, {"s": None}, {"d": "2020-01-01"}, [], "text", None,
             {"n": 0}, {"n": 6}, {"n": 3}, {"s": ""}, {"s": "abcd"}, {"s": "ab"}, {"x": 0.4}, {"x": 0.5}, {"x": 1}]


def test_plain_schemas_are_checked_by_hand_and_agree_with_jsonschema():
    for schema, instance in itertools.product(PLAIN, INSTANCES):
        quick = compile_validator("t", schema)
        assert isinstance(quick, _Quick), schema
        cls = Draft7Validator if "$schema" in schema else Draft202012Validator
        expected = [e.message for e in cls(schema).iter_errors(instance)]
        assert [e.message for e in quick.iter_errors(instance)] == expected, (schema, instance)


def test_schemas_with_constraints_keep_jsonschema():
    for schema in NOT_PLAIN:
        assert not isinstance(compile_validator("t", schema), _Quick), schema


def test_a_failing_call_gets_jsonschema_s_precise_message():
    quick = compile_validator("t", PLAIN[0])
    assert problems(quick, {"text": "ok"}) is None
    message = problems(quick, {"text": 3})
    assert message == "/text: 3 is not of type 'string'"
    assert validation.problems(quick, {}) == "/text: required, but missing"
