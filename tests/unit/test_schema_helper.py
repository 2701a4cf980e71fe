"""The MCP schema helper accepts valid messages and rejects broken ones with readable errors."""
import pytest

from tests.support.schema import classify, result_type, validate_message, validate_result

TOOL = {"name": "echo", "description": "Echo.", "inputSchema": {"type": "object", "properties": {}}}


def result(value, id_=1):
    return {"jsonrpc": "2.0", "id": id_, "result": value}


def test_accepts_valid_tools_list_result():
    assert validate_message(result({"tools": [TOOL], "nextCursor": "2"}), method="tools/list") == "ListToolsResult"
    assert validate_result({"tools": []}, "tools/list") == "ListToolsResult"


def test_rejects_tool_without_input_schema():
    with pytest.raises(AssertionError, match=r"ListToolsResult.*inputSchema.*required"):
        validate_message(result({"tools": [{"name": "echo"}]}), method="tools/list")


@pytest.mark.parametrize("msg", [
    {"jsonrpc": "2.0", "id": None, "method": "ping"},
    {"jsonrpc": "2.0", "id": None, "result": {}},
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}},
])
def test_rejects_null_id(msg):
    with pytest.raises(AssertionError, match="must not be null"):
        validate_message(msg)


def test_response_needs_exactly_one_of_result_and_error():
    for msg in ({"jsonrpc": "2.0", "id": 1}, {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "m"}}):
        with pytest.raises(AssertionError, match="exactly one of result/error"):
            validate_message(msg)


def test_classifies_by_method_and_direction():
    call = {"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
    assert classify(call) == "request"
    assert validate_message(call, direction="client") == "CallToolRequest"
    with pytest.raises(AssertionError, match="client request"):
        validate_message(call, direction="server")
    with pytest.raises(AssertionError, match="CallToolRequest"):
        validate_message({**call, "params": {}}, direction="client")
    changed = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert validate_message(changed) == "ToolListChangedNotification"
    error = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "nope"}}
    assert validate_message(error) == "JSONRPCErrorResponse"


def test_result_types_by_method():
    assert result_type("initialize") == "InitializeResult"
    assert result_type("tools/call") == "CallToolResult"
    assert result_type("ping") == "EmptyResult"
    init = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "troupe", "version": "0"}}
    assert validate_result(init, "initialize") == "InitializeResult"
    ok = {"content": [{"type": "text", "text": "3"}], "structuredContent": {"sum": 3}}
    assert validate_result(ok, "tools/call") == "CallToolResult"
    with pytest.raises(AssertionError, match="CallToolResult"):
        validate_result({"content": [{"type": "text"}]}, "tools/call")
