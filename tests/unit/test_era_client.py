"""The client side of the stateless era: the probe's verdict, the _meta envelope, the HTTP headers
that mirror a request, the x-mcp-header rules, and the discover result as a Handshake."""
from __future__ import annotations

import base64

import pytest

from actors.messages import UpstreamError
from actors.protocol import handshake, header_params, jsonrpc, modern_client
from actors.protocol.modern_client import LEGACY, MODERN


def err(code: int, data=None) -> UpstreamError:
    return UpstreamError(code, "no", data, server="s")


@pytest.mark.parametrize("outcome, era", [
    ({"supportedVersions": ["2026-07-28"], "capabilities": {}}, MODERN),
    ({"supportedVersions": ["2025-11-25", "2026-07-28"]}, MODERN),
    ({"supportedVersions": ["2025-11-25"]}, LEGACY),  # answers discover, advertises only sessions
    ({}, LEGACY),  # a stub that answers anything with {}
    (err(jsonrpc.METHOD_NOT_FOUND), LEGACY),
    (err(jsonrpc.INVALID_PARAMS), LEGACY),
    (err(-32000, {"httpStatus": 400}), LEGACY),
    (err(modern_client.UNSUPPORTED_VERSION, {"supported": ["2026-07-28"], "requested": "x"}), MODERN),
    (err(modern_client.UNSUPPORTED_VERSION, {"supported": ["2025-06-18"]}), LEGACY),
    (err(modern_client.UNSUPPORTED_VERSION), LEGACY),  # no data: not positive evidence
    (err(modern_client.HEADER_MISMATCH), MODERN),
    (err(modern_client.MISSING_CAPABILITY), MODERN),
])
def test_verdict(outcome, era):
    assert modern_client.verdict(outcome) == era


def test_verdict_modern_only_with_no_common_version_is_incompatible():
    with pytest.raises(modern_client.Incompatible, match="2027-01-01"):
        modern_client.verdict(err(modern_client.UNSUPPORTED_VERSION, {"supported": ["2027-01-01"]}))


def test_outage_is_a_timeout_or_a_failure_without_http_status():
    assert modern_client.outage(err(jsonrpc.REQUEST_TIMEOUT))
    assert modern_client.outage(err(jsonrpc.SERVER_UNAVAILABLE))
    assert not modern_client.outage(err(jsonrpc.SERVER_UNAVAILABLE, {"httpStatus": 404}))
    assert not modern_client.outage(err(jsonrpc.METHOD_NOT_FOUND))
    assert not modern_client.outage({"supportedVersions": []})


def test_refused_initialize_needs_a_modern_version_in_the_error():
    assert modern_client.refused_initialize(err(modern_client.UNSUPPORTED_VERSION, {"supported": ["2026-07-28"]}))
    assert not modern_client.refused_initialize(err(modern_client.UNSUPPORTED_VERSION, {"supported": ["1"]}))
    assert not modern_client.refused_initialize(err(jsonrpc.INVALID_PARAMS))
    assert not modern_client.refused_initialize({"protocolVersion": "2025-11-25"})


def test_envelope_keeps_the_callers_meta_and_adds_the_required_keys():
    params = {"name": "t", "_meta": {"progressToken": 7, "io.modelcontextprotocol/logLevel": "error"}}
    out = modern_client.envelope(params, {"elicitation": {}}, log_level="debug")
    meta = out["_meta"]
    assert meta["progressToken"] == 7 and meta[modern_client.META_VERSION] == "2026-07-28"
    assert meta[modern_client.META_CAPABILITIES] == {"elicitation": {}}
    assert meta[modern_client.META_CLIENT_INFO]["name"] == "troupe"
    assert meta[modern_client.META_LOG_LEVEL] == "error"  # the caller's own level wins
    assert params["_meta"] == {"progressToken": 7, "io.modelcontextprotocol/logLevel": "error"}  # not mutated
    assert modern_client.envelope(None)["_meta"][modern_client.META_CAPABILITIES] == {}


def test_relayable_and_forwarded_capabilities():
    assert modern_client.relayable({"sampling": {}, "elicitation": {"form": {}}, "tasks": {}, "x": 1}) == \
        {"sampling": {}, "elicitation": {"form": {}}}
    assert modern_client.relayable(None) == {}
    caps = {"tools": {"listChanged": True}, "tasks": {}, "extensions": {"a": {}}, "experimental": {}, "prompts": {}}
    assert modern_client.forwarded_capabilities(caps) == {"tools": {"listChanged": True}, "prompts": {}}


def test_request_headers_mirror_method_name_and_params():
    maps = {"deploy": ((("region",), "Region"), (("opts", "dry"), "Dry"), (("n",), "N"))}
    msg = jsonrpc.request(1, "tools/call", {"name": "deploy", "arguments": {"region": "é-1", "opts": {"dry": True},
                                                                            "n": 3}})
    headers = modern_client.request_headers(msg, maps)
    assert headers["MCP-Protocol-Version"] == "2026-07-28" and headers["Mcp-Method"] == "tools/call"
    assert headers["Mcp-Name"] == "deploy"
    assert headers["Mcp-Param-Region"] == "=?base64?" + base64.b64encode("é-1".encode()).decode() + "?="
    assert headers["Mcp-Param-Dry"] == "true" and headers["Mcp-Param-N"] == "3"
    read = modern_client.request_headers(jsonrpc.request(2, "resources/read", {"uri": "file:///a b"}))
    assert read["Mcp-Name"] == "file:///a b"
    listing = modern_client.request_headers(jsonrpc.request(3, "tools/list", {}))
    assert "Mcp-Name" not in listing and listing["Mcp-Method"] == "tools/list"


def test_absent_header_arguments_send_no_header():
    maps = {"deploy": ((("region",), "Region"),)}
    headers = modern_client.request_headers(jsonrpc.request(1, "tools/call", {"name": "deploy"}), maps)
    assert not any(h.startswith("Mcp-Param-") for h in headers)


@pytest.mark.parametrize("schema, bad", [
    ({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region"}}}, None),
    ({"type": "object", "properties": {"o": {"type": "object", "properties": {
        "d": {"type": "boolean", "x-mcp-header": "Dry"}}}}}, None),
    ({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}, "number"),
    ({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Bad Header"}}}, "token"),
    ({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "X"},
                                       "b": {"type": "string", "x-mcp-header": "x"}}}, "twice"),
    ({"type": "object", "x-mcp-header": "Root"}, "outside"),
    ({"type": "object", "properties": {"l": {"type": "array", "items": {
        "type": "string", "x-mcp-header": "Item"}}}}, "outside"),
    ({"type": "object", "anyOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}, "outside"),
    ({"type": "object", "properties": {"a": {"type": "string", "default": {"x-mcp-header": 1}}}}, None),
])
def test_invalid_header_annotation(schema, bad):
    reason = header_params.invalid_annotation(schema)
    assert (reason is None) if bad is None else (bad in (reason or "")), reason


def test_header_map_of_a_valid_schema():
    schema = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "Region"},
                                               "o": {"type": "object", "properties": {
                                                   "d": {"type": "boolean", "x-mcp-header": "Dry"}}}}}
    assert dict(modern_client.header_map(schema)) == {("r",): "Region", ("o", "d"): "Dry"}


def test_discovery_opening_and_accept_discover():
    method, params = handshake.discovery()
    assert method == "server/discover"
    assert params["_meta"][modern_client.META_VERSION] == "2026-07-28"
    opened = handshake.accept_discover({
        "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}, "tasks": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "m", "version": "1"}}})
    assert opened.version == "2026-07-28" and opened.capabilities == {"tools": {}}
    assert opened.server_info == {"name": "m", "version": "1"}
    assert handshake.confirmation(opened) is None  # no initialized notification in the stateless era
    with pytest.raises(handshake.HandshakeError):
        handshake.accept_discover({"supportedVersions": ["2025-11-25"]})
    with pytest.raises(handshake.HandshakeError):
        handshake.accept_discover(None)


def test_legacy_handshake_is_unchanged():
    method, params = handshake.opening({"sampling": {}})
    assert method == "initialize" and "_meta" not in params
    opened = handshake.accept({"protocolVersion": "2025-06-18", "capabilities": {"tasks": {}}})
    assert opened.capabilities == {"tasks": {}}  # legacy servers are forwarded as before
    assert handshake.confirmation(opened) == jsonrpc.notification("notifications/initialized")


def test_modern_error_body():
    assert modern_client.is_modern_error_body({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "x"}})
    assert not modern_client.is_modern_error_body({"error": "text"})
    assert not modern_client.is_modern_error_body(["x"])


def test_a_schema_nested_deeper_than_the_recursion_limit_is_walked_not_crashed_on():
    # an upstream's tools/list may carry any finite JSON: the walk must end without recursion
    schema: dict = {"type": "string", "x-mcp-header": "Deep"}
    for i in range(5000):
        schema = {"type": "object", "properties": {f"p{i}": schema}}
    assert header_params.invalid_annotation(schema) is None
    assert len(next(header_params.annotated(schema))[0]) == 5000
