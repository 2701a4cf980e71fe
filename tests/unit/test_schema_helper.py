"""The MCP schema helper (the SDK's mcp.types models) accepts valid messages and rejects broken ones readably."""
import pytest

from tests.support.schema import classify, result_type, validate, validate_message, validate_result

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


@pytest.mark.parametrize(("result", "method", "where"), [
    ({"content": [{"type": "text", "text": 3}]}, "tools/call", r"content\.0.*text.*valid string"),
    ({"content": [{"type": "text", "text": "x"}], "isError": "true"}, "tools/call", r"isError.*valid boolean"),
    ({"tools": [], "nextCursor": 2}, "tools/list", r"nextCursor.*valid string"),
    ({"tools": {"name": "echo"}}, "tools/list", r"tools.*valid list"),
])
def test_rejects_wrong_field_type_without_coercing(result, method, where):
    with pytest.raises(AssertionError, match=where):
        validate_result(result, method)


@pytest.mark.parametrize(("result", "method", "where"), [
    ({"tools": [{"name": "echo", "input_schema": {"type": "object"}}]}, "tools/list", r"inputSchema.*required"),
    ({"isError": False}, "tools/call", r"content.*required"),
    ({"protocolVersion": "2025-11-25", "capabilities": {}}, "initialize", r"serverInfo.*required"),
])
def test_rejects_missing_required_field(result, method, where):
    # input_schema: a field is known only by its wire name, never the model's Python name
    with pytest.raises(AssertionError, match=where):
        validate_result(result, method)


def test_rejects_bad_envelopes():
    with pytest.raises(AssertionError, match=r"JSONRPCResultResponse.*id"):
        validate_message({"jsonrpc": "2.0", "id": 1.5, "result": {}})
    with pytest.raises(AssertionError, match=r"JSONRPCErrorResponse.*error\.code"):
        validate_message({"jsonrpc": "2.0", "id": 1, "error": {"code": "-32601", "message": "nope"}})
    with pytest.raises(AssertionError, match=r"jsonrpc"):
        validate_message({"jsonrpc": "1.0", "id": 1, "method": "no/such"})
    assert validate_message({"jsonrpc": "2.0", "id": 1, "method": "no/such"}) == "JSONRPCRequest"


def test_accepts_valid_messages_of_both_eras():
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    assert validate_message(progress) == "ProgressNotification"
    assert validate_message(result({}), method="ping", version="2025-03-26") == "EmptyResult"
    validate({"name": "echo", "inputSchema": {"type": "object"}}, "Tool")
    # 2026-07-28: list results are cacheable and every result says its resultType.
    listed = {"tools": [TOOL], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}
    assert validate_result(listed, "tools/list", "2026-07-28") == "ListToolsResult"
    with pytest.raises(AssertionError, match=r"ListToolsResult \(2026-07-28\).*cacheScope.*required"):
        validate_result({"tools": [TOOL]}, "tools/list", "2026-07-28")
    assert result_type("tools/call", "2026-07-28") == "CallToolResult"
    more = {"resultType": "input_required", "requestState": "s1"}
    assert validate_result(more, "tools/call", "2026-07-28") == "InputRequiredResult"
    with pytest.raises(AssertionError, match="unknown protocol version"):
        validate_result({}, "ping", "2099-01-01")
