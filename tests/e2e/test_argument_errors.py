"""Wrong arguments, through a real troupe in front of the official SDK's server: the model reads
what is wrong in JSON terms (the value's JSON Pointer, null/true/false, JSON-quoted strings),
as a tool error it can correct, never a Python repr."""
from __future__ import annotations

from tests.e2e.conftest import error_text
from tests.support.troupe import Troupe, server, text_of, write_config


def test_wrong_arguments_are_told_in_json_terms(make):
    t = make([server("m", "tests.servers.sdk_modern")])
    assert text_of(t.call("m__count", {"n": 3})) == "counted 3"  # the schema is the server's own
    assert error_text(t.call("m__count", {"n": None})) == \
        "invalid arguments for m__count: /n: null is not of type 'integer'"
    assert error_text(t.call("m__count", {"n": True})) == \
        "invalid arguments for m__count: /n: true is not of type 'integer'"
    assert error_text(t.call("m__count", {"n": {"k": False}})) == \
        "invalid arguments for m__count: /n: {\"k\":false} is not of type 'integer'"
    assert error_text(t.call("m__count", {})) == "invalid arguments for m__count: /n: required, but missing"
    assert error_text(t.call("m__shout", {"text": ["it's"]})) == \
        "invalid arguments for m__shout: /text: [\"it's\"] is not of type 'string'"


def test_meta_mode_s_call_tool_tells_the_same(tmp_path):
    t = Troupe(write_config(tmp_path, [server("m", "tests.servers.sdk_modern")], mode="meta"))
    try:
        t.initialize()
        t.request("tools/list", timeout=30)  # waits for start-up to settle, as the make fixture does
        text = error_text(t.call("call_tool", {"name": "m__count", "arguments": {"n": None}}, timeout=30))
        assert text.startswith("invalid arguments for m__count: /n: null is not of type 'integer'"), text
    finally:
        t.close()
