"""The header rules of MCP 2026-07-28 requests over HTTP, and which POSTs take the stateless path."""
from __future__ import annotations

import pytest

from actors.serve import modern_headers
from actors.serve.modern_headers import HeaderMismatch, check, check_params, decode_value, invalid_annotation
from actors.serve.modern_http import routes_modern

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
SCHEMA = {"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "shard": {"type": "integer", "x-mcp-header": "Shard"},
    "dry": {"type": "boolean", "x-mcp-header": "Dry"},
    "nested": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}}}}


def _environ(**headers) -> dict:
    return {"HTTP_" + k.upper().replace("-", "_"): v for k, v in headers.items()}


def _msg(method: str, **params) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}


def _ok(method="tools/list", **headers) -> dict:
    return _environ(**{"MCP-Protocol-Version": MODERN, "Mcp-Method": method, **headers})


def test_version_and_method_headers_must_repeat_the_body():
    check(_ok(), _msg("tools/list"))
    with pytest.raises(HeaderMismatch, match="MCP-Protocol-Version"):
        check(_environ(**{"Mcp-Method": "tools/list"}), _msg("tools/list"))
    with pytest.raises(HeaderMismatch, match="Mcp-Method"):
        check(_ok("prompts/list"), _msg("tools/list"))
    with pytest.raises(HeaderMismatch, match="Mcp-Method"):
        check(_environ(**{"MCP-Protocol-Version": MODERN}), _msg("tools/list"))


def test_a_body_without_the_envelope_is_not_checked_here():
    # The spec checks _meta's shape first (-32602, the front's answer), then the headers.
    check(_ok("prompts/list"), {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})


@pytest.mark.parametrize(("method", "key", "value"), [
    ("tools/call", "name", "echo__echo"), ("prompts/get", "name", "greet"), ("resources/read", "uri", "file:///a b")])
def test_mcp_name_mirrors_the_name_or_uri(method, key, value):
    check(_ok(method, **{"Mcp-Name": value}), _msg(method, **{key: value}))
    with pytest.raises(HeaderMismatch, match="Mcp-Name"):
        check(_ok(method, **{"Mcp-Name": value + "x"}), _msg(method, **{key: value}))
    with pytest.raises(HeaderMismatch, match="Mcp-Name"):
        check(_ok(method), _msg(method, **{key: value}))


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
def test_a_task_request_may_leave_mcp_name_out_but_never_contradict_it(method):
    """The SDK's client (fastmcp-tasks' too) sends no Mcp-Name for tasks/*; FastMCP's server takes that."""
    check(_ok(method), _msg(method, taskId="troupe1.abc"))
    check(_ok(method, **{"Mcp-Name": "troupe1.abc"}), _msg(method, taskId="troupe1.abc"))
    with pytest.raises(HeaderMismatch, match="Mcp-Name"):
        check(_ok(method, **{"Mcp-Name": "troupe1.abd"}), _msg(method, taskId="troupe1.abc"))


def test_non_ascii_values_travel_base64_wrapped():
    assert decode_value("=?base64?WsO8cmljaA==?=") == "Zürich"
    assert decode_value("plain") == "plain"
    assert decode_value("=?base64?not base64?=") is None
    assert decode_value("=?base64?WsO8cmljaB==?=") is None  # non-canonical padding bits
    check(_ok("tools/call", **{"Mcp-Name": "=?base64?WsO8cmljaA==?="}), _msg("tools/call", name="Zürich"))


def test_param_headers_agree_with_the_arguments():
    env = _environ(**{"Mcp-Param-Region": "eu", "Mcp-Param-Shard": "42.0", "Mcp-Param-Dry": "false",
                      "Mcp-Param-Zone": "a"})
    check_params(env, SCHEMA, {"region": "eu", "shard": 42, "dry": False, "nested": {"zone": "a"}})
    check_params(_environ(), SCHEMA, {"region": None})  # null counts as absent
    bad = [({"region": "eu"}, {"Mcp-Param-Region": "us"}),
           ({"region": "eu"}, {}),
           ({}, {"Mcp-Param-Region": "eu"}),
           ({"shard": 42}, {"Mcp-Param-Shard": "42.5"}),
           ({"dry": True}, {"Mcp-Param-Dry": "True"}),
           ({"region": ["eu"]}, {"Mcp-Param-Region": "eu"}),
           ({"nested": {"zone": "a"}}, {"Mcp-Param-Zone": "b"})]
    for arguments, headers in bad:
        with pytest.raises(HeaderMismatch):
            check_params(_environ(**headers), SCHEMA, arguments)


def test_a_tool_with_an_invalid_annotation_checks_nothing():
    for schema in ({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
                   {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad name"}}},
                   {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"},
                                                     "b": {"type": "string", "x-mcp-header": "a"}}},
                   {"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}):
        assert invalid_annotation(schema) is not None
        check_params(_environ(**{"Mcp-Param-A": "whatever"}), schema, {"a": "x"})
    assert invalid_annotation(SCHEMA) is None


def test_a_schema_is_walked_once_and_each_schema_object_for_itself(monkeypatch):
    walks = []
    real = modern_headers.annotated
    monkeypatch.setattr(modern_headers, "annotated", lambda schema: walks.append(schema) or real(schema))
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Once"}}}
    for _ in range(3):
        check_params(_environ(**{"Mcp-Param-Once": "x"}), schema, {"a": "x"})
    assert walks == [schema]
    for i in range(20):  # fresh schemas, each freed after use: none may inherit another's annotations
        fresh = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": f"A{i}"}}}
        check_params(_environ(**{f"Mcp-Param-A{i}": "x"}), fresh, {"a": "x"})
        with pytest.raises(HeaderMismatch, match=f"Mcp-Param-A{i}"):
            check_params(_environ(), fresh, {"a": "x"})


def test_tools_call_checks_params_only_with_a_schema():
    msg = _msg("tools/call", name="t", arguments={"region": "eu"})
    env = _ok("tools/call", **{"Mcp-Name": "t"})
    check(env, msg)  # the tool is unknown (or meta mode): nothing to check against
    with pytest.raises(HeaderMismatch, match="Mcp-Param-Region"):
        check(env, msg, SCHEMA)


def test_which_posts_take_the_stateless_path():
    modern = _environ(**{"MCP-Protocol-Version": MODERN})
    assert routes_modern(modern, _msg("tools/list"))
    assert routes_modern(modern, [_msg("tools/list")])  # refused there: modern has no batches
    # initialize with the modern envelope is a modern request for a removed method (404, -32601 there);
    # a handshake, which carries none, is always the session era, whatever its headers say.
    assert routes_modern(modern, _msg("initialize"))
    handshake = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    assert not routes_modern(modern, handshake)
    assert not routes_modern(_environ(), _msg("initialize"))
    assert not routes_modern(_environ(**{"MCP-Protocol-Version": "2025-11-25"}), _msg("tools/list"))
    future = _environ(**{"MCP-Protocol-Version": "2099-01-01"})
    assert routes_modern(future, _msg("tools/list"))  # _meta names a version: told -32022 there
    assert not routes_modern(future, {"jsonrpc": "2.0", "id": 1, "method": "ping"})  # the session path's 400
    assert not routes_modern(_environ(), _msg("tools/list"))
    assert routes_modern(_environ(), _msg("server/discover"))  # an era probe without headers
    assert not routes_modern(_environ(**{"Mcp-Session-Id": "abc"}), _msg("server/discover"))
