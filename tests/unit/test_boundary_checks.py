"""The boundary's checks on their own: the depth limit (protocol/depth, jsonrpc.decode), a client's
messages (protocol/inbound) and a server's (protocol/server_shapes)."""
from __future__ import annotations

import orjson
import pytest

from actors.protocol import depth, inbound, jsonrpc, server_shapes
from actors.transports.base import TransportGarbage
from actors.transports.sse_stream import parse_payload


def _arrays(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def _too_deep(data: bytes | str) -> bool:
    return depth.too_deep(data, orjson.loads(data))


# ---------------------------------------------------------------- depth


@pytest.mark.parametrize("levels,deep", [(1, False), (128, False), (129, True), (300, True)])
def test_depth_is_counted_exactly(levels, deep):
    assert _too_deep(_arrays(levels)) is deep
    assert _too_deep(_arrays(levels).decode()) is deep  # text as well as bytes
    assert _too_deep(b'{"a":' * (levels - 1) + b"[]" + b"}" * (levels - 1)) is deep  # objects alike


def test_brackets_inside_strings_do_not_count():
    assert not _too_deep(orjson.dumps({"text": "[" * 500 + "{" * 500}))
    tricky = {"a": 'quote \\" and [[[ \\\\', "b": "\\" * 7 + '"[' * 200, "c": _nested(100)}
    assert not _too_deep(orjson.dumps(tricky))
    assert _too_deep(orjson.dumps({"a": '\\"[[\\\\', "c": _nested(200)}))


def test_many_shallow_containers_are_not_deep():
    assert not _too_deep(orjson.dumps({"tools": [{"name": f"t{i}", "s": {"p": [1]}} for i in range(1000)]}))


def _nested(levels: int):
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_decode_refuses_too_deep_with_the_id_when_it_can_be_read():
    with pytest.raises(jsonrpc.TooDeep) as answer:
        jsonrpc.decode(b'{"jsonrpc":"2.0","id":3,"result":{"x":' + _arrays(200) + b"}}")
    assert answer.value.message_id == 3 and answer.value.answer and "128" in str(answer.value)
    with pytest.raises(jsonrpc.TooDeep) as request:
        jsonrpc.decode(b'{"jsonrpc":"2.0","id":4,"method":"x","params":{"x":' + _arrays(200) + b"}}")
    assert request.value.message_id == 4 and not request.value.answer
    with pytest.raises(jsonrpc.TooDeep) as batch:
        jsonrpc.decode(b"[" + _arrays(200) + b"]")
    assert batch.value.message_id is None
    with pytest.raises(ValueError) as bad:
        jsonrpc.decode(b"{nope")
    assert not isinstance(bad.value, jsonrpc.TooDeep)


@pytest.mark.parametrize("data,found", [
    (b'{"jsonrpc":"2.0","id":7,"result":{"x":' + _arrays(1100) + b"}}", 7),  # ids first (orjson, the Python SDK)
    (b'{"result":{"x":' + _arrays(1100) + b'},"jsonrpc":"2.0","id":"a"}', "a"),  # id last (the TypeScript SDK)
    (b'{"jsonrpc":"2.0","id":7,"method":"x","params":' + _arrays(1100) + b"}", None),  # a request: not ours
    (b'{"result":{"x":' + _arrays(1100) + b',"id":5}}', None),  # a nested id is nobody's
])
def test_past_orjsons_limit_only_a_surely_top_level_answer_id_is_read(data, found):
    with pytest.raises(jsonrpc.TooDeep) as refused:
        jsonrpc.decode(data)
    assert refused.value.message_id == found and refused.value.answer is (found is not None)


def test_an_upstream_stream_turns_a_deep_answer_into_garbage_naming_its_request():
    items = parse_payload(b'{"jsonrpc":"2.0","id":9,"result":{"x":' + _arrays(300) + b"}}")
    assert len(items) == 1 and isinstance(items[0], TransportGarbage)
    assert items[0].request_id == 9 and "128" in items[0].reason


# ---------------------------------------------------------------- a client's messages


def _req(method, params=None, rid=1):
    msg = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    return msg


MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


@pytest.mark.parametrize("msg,code,text", [
    ("x", -32600, "expected a JSON-RPC object, got string"),
    ({"jsonrpc": "2.0", "id": [1], "method": "ping"}, -32600, "id must be a string or an integer, got array"),
    ({"jsonrpc": "2.0", "id": True, "method": "ping"}, -32600, "id must be a string or an integer, got boolean"),
    ({"jsonrpc": "1.0", "id": 1, "method": "ping"}, -32600, 'jsonrpc must be "2.0"'),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, -32600, "method must be a string, got integer"),
    (_req("tools/list", [1]), -32602, "params must be an object, got array"),
    (_req("tools/call", {"arguments": {}}), -32602, "params.name is required (a string)"),
    (_req("tools/call", {"name": "x", "arguments": "a"}), -32602, "params.arguments must be an object, got string"),
    (_req("resources/read", {"uri": 5}), -32602, "params.uri must be a string, got integer"),
    (_req("prompts/get", {"name": None}), -32602, "params.name is required"),
    (_req("tools/list", {"cursor": 3}), -32602, "params.cursor must be a string, got integer"),
    (_req("logging/setLevel", {"level": "loud"}), -32602, "params.level must be one of debug, info"),
    (_req("tools/call", {"name": "x", "_meta": []}), -32602, "params._meta must be an object, got array"),
    (_req("tools/call", {"name": "x", "_meta": {"progressToken": 1.5}}), -32602,
     "params._meta.progressToken must be a string or an integer, got number"),
    (_req("tools/call", {"name": "x", "requestState": "\u00fc", "_meta": MODERN_META}), -32602,
     "params.requestState must be printable ASCII"),
    (_req("tools/call", {"name": "x", "requestState": 5, "_meta": MODERN_META}), -32602,
     "params.requestState must be a string, got integer"),
    (_req("tools/call", {"name": "x", "inputResponses": {"k": "yes"}, "_meta": MODERN_META}), -32602,
     "params.inputResponses.k must be an object, got string"),
    (_req("completion/complete", {"ref": "x"}), -32602, "params.ref must be an object, got string"),
    (_req("initialize", {"capabilities": []}), -32602, "params.capabilities must be an object, got array"),
    ({"jsonrpc": "2.0", "id": 4}, -32600, "message has no method, result or error"),
])
def test_a_malformed_client_request_is_answered_naming_the_field(msg, code, text):
    checked = inbound.check(msg, "test client")
    assert checked.message is None and len(checked.answers) == 1
    error = checked.answers[0]["error"]
    assert error["code"] == code and text in error["message"], error
    rid = msg.get("id") if isinstance(msg, dict) else None
    assert checked.answers[0].get("id") == (rid if inbound.is_id(rid) else None)


@pytest.mark.parametrize("msg", [
    _req("tools/call", {"name": "x", "arguments": {"a": [1]}, "_meta": {"progressToken": "p"}}),
    _req("tools/call", {"name": "x", "arguments": None}),
    _req("ping"), _req("tools/list", {"cursor": None}), _req("resources/read", {"uri": "a://b"}, rid="s"),
    _req("tools/call", {"name": "x", "requestState": "troupe1.abc.def", "inputResponses": {"k": {}},
                        "_meta": MODERN_META}),
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": "troupe-1", "result": {"action": "accept"}},
    {"jsonrpc": "2.0", "id": "troupe-2", "error": {"code": -1, "message": "declined"}},
])
def test_a_well_shaped_message_goes_on_unchanged(msg):
    checked = inbound.check(msg, "test client")
    assert checked.message is msg and checked.answers == []


@pytest.mark.parametrize("msg", [
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {"a": 1}}},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"},
    {"jsonrpc": "2.0", "method": 7},
    {"jsonrpc": "2.0", "id": {"x": 1}, "result": {}},  # an answer nobody can be waiting for
])
def test_a_malformed_notification_or_unroutable_answer_is_dropped_unanswered(msg):
    checked = inbound.check(msg, "test client")
    assert checked.message is None and checked.answers == []


@pytest.mark.parametrize("error,text", [([1], "error must be an object, got array"),
                                        ({"code": [1], "message": "m"}, "error.code must be an integer, got array"),
                                        ({"code": True, "message": "m"}, "error.code must be an integer, got boolean"),
                                        ({"code": 1, "message": 2}, "error.message must be a string, got integer")])
def test_a_malformed_answer_to_a_relayed_question_answers_it_with_an_error(error, text):
    checked = inbound.check({"jsonrpc": "2.0", "id": "troupe-3", "error": error}, "test client")
    assert checked.answers == []
    assert checked.message["id"] == "troupe-3" and checked.message["error"]["code"] == jsonrpc.INTERNAL_ERROR
    assert text in checked.message["error"]["message"]
    result = inbound.check({"jsonrpc": "2.0", "id": "troupe-4", "result": "yes"}, "test client").message
    assert "result must be an object, got string" in result["error"]["message"]


def test_parse_answers_bad_and_deep_json():
    bad = inbound.parse(b"{nope", "test client")
    assert bad.message is None and bad.answers[0]["error"]["code"] == jsonrpc.PARSE_ERROR
    deep = inbound.parse(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"a":' + _arrays(200) + b"}}", "c")
    assert deep.message is None and deep.answers[0]["id"] == 5
    assert deep.answers[0]["error"]["code"] == jsonrpc.INVALID_REQUEST and "128" in deep.answers[0]["error"]["message"]


def test_a_batch_keeps_its_good_entries_and_its_answer_array_takes_the_refusals():
    good, bad = _req("ping", rid=1), _req("tools/call", "x", rid=2)
    checked = inbound.check([good, bad, {"jsonrpc": "2.0", "method": "notifications/initialized"}], "test client")
    assert checked.batch and len(checked.message) == 2 and [a["id"] for a in checked.answers] == [2]
    sent: list = []
    to = inbound.deliver(checked, sent.append)
    assert to is not None and sent == []  # the refusal waits for the Session's array
    to([{"jsonrpc": "2.0", "id": 1, "result": {}}])
    to({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    assert [a["id"] for a in sent[0]] == [2, 1] and sent[1]["method"] == "notifications/message"
    refused_whole = inbound.check([bad], "test client")
    sent.clear()
    assert refused_whole.message is None and inbound.deliver(refused_whole, sent.append) is None
    assert [a["id"] for a in sent[0]] == [2]
    empty = inbound.check([], "test client")
    assert empty.message is None and empty.answers[0]["error"]["code"] == jsonrpc.INVALID_REQUEST


# ---------------------------------------------------------------- a server's messages


def _answer(result=None, error=None):
    msg: dict = {"jsonrpc": "2.0", "id": 1}
    if error is not None:
        msg["error"] = error
    else:
        msg["result"] = result
    return msg


@pytest.mark.parametrize("method,msg,text", [
    ("tools/call", _answer(error={"code": [1], "message": "x"}), "error.code must be an integer, got array"),
    ("tools/call", _answer(error={"code": {"a": 1}, "message": "x"}), "error.code must be an integer, got object"),
    ("tools/call", _answer(error={"code": "1", "message": "x"}), "error.code must be an integer, got string"),
    ("tools/call", _answer(error={"code": False, "message": "x"}), "error.code must be an integer, got boolean"),
    ("tools/call", _answer(error="boom"), "error must be an object, got string"),
    ("tools/call", _answer(error={"code": 1}), "error.message must be a string, got null"),
    ("tools/call", _answer(result=[1]), "result must be an object, got array"),
    ("tools/call", {"jsonrpc": "2.0", "id": 1}, "a response needs result or error"),
    ("tools/call", _answer({"content": "text"}), "result.content must be an array, got string"),
    ("tools/call", _answer({"content": [], "isError": "yes"}), "result.isError must be a boolean, got string"),
    ("resources/read", _answer({"contents": 5}), "result.contents must be an array, got integer"),
    ("resources/read", _answer({"contents": [5]}), "result.contents[0] must be an object, got integer"),
    ("prompts/get", _answer({"messages": {}}), "result.messages must be an array, got object"),
    ("tools/list", _answer({"tools": [{"name": 5}]}), "result.tools[0].name must be a string, got integer"),
    ("tools/list", _answer({"tools": [], "nextCursor": 2}), "result.nextCursor must be a string, got integer"),
    ("resources/list", _answer({"resources": [{"name": "n"}]}), "result.resources[0].uri must be a string, got null"),
    ("resources/templates/list", _answer({"resourceTemplates": "x"}), "result.resourceTemplates must be an array"),
    ("prompts/list", _answer({"prompts": [[]]}), "result.prompts[0] must be an object, got array"),
    ("completion/complete", _answer({"completion": {"values": [1]}}), "result.completion.values must be an array"),
    ("initialize", _answer({"protocolVersion": "2025-11-25", "capabilities": "all"}),
     "result.capabilities must be an object, got string"),
    ("tools/call", _answer({"resultType": "input_required", "inputRequests": {"q": {"method": "x", "params": "x"}}}),
     "result.inputRequests.q.params must be an object, got string"),
    ("tools/call", _answer({"resultType": "input_required", "inputRequests": {"q": {"params": {}}}}),
     "result.inputRequests.q.method must be a string, got null"),
    ("tools/call", _answer({"resultType": "input_required", "inputRequests": [1]}),
     "result.inputRequests must be an object, got array"),
    ("tools/call", _answer({"resultType": "input_required", "requestState": 5}),
     "result.requestState must be a string, got integer"),
    ("tools/call", _answer({"_meta": "m"}), "result._meta must be an object, got string"),
])
def test_a_malformed_server_answer_is_told_by_field(method, msg, text):
    problem = server_shapes.answer_problem(msg, method)
    assert problem is not None and text in problem, problem


@pytest.mark.parametrize("method,msg", [
    ("tools/call", _answer({"content": [{"type": "text", "text": "x"}], "isError": False})),
    ("tools/call", _answer({"resultType": "input_required", "inputRequests": {"q": {"method": "roots/list"}},
                            "requestState": "s"})),
    ("tools/call", _answer(error={"code": -32602, "message": "bad", "data": [1]})),
    ("tools/list", _answer({"tools": [{"name": "a"}], "nextCursor": None})),
    ("resources/read", _answer({"contents": [{"uri": "a://b", "text": "t"}]})),
    ("ping", _answer({})),
    ("tools/list", {"id": 1, "result": {"tools": []}}),  # no "jsonrpc": upstreams that omit it have worked
])
def test_a_well_shaped_server_answer_passes(method, msg):
    assert server_shapes.answer_problem(msg, method) is None


@pytest.mark.parametrize("msg,text", [
    ({"method": "elicitation/create", "id": 1, "params": "x"}, "params must be an object, got string"),
    ({"method": "elicitation/create", "id": 1, "params": {"message": 5}}, "params.message must be a string"),
    ({"method": "notifications/progress", "params": {"progressToken": {"t": 1}, "progress": 1}},
     "params.progressToken must be a string or an integer, got object"),
    ({"method": "notifications/progress", "params": {"progressToken": 1, "progress": "half"}},
     "params.progress must be a number, got string"),
    ({"method": "notifications/message", "params": {"level": 3}}, "params.level must be a string, got integer"),
    ({"method": "notifications/resources/updated", "params": {"uri": None}}, "params.uri must be a string, got null"),
    ({"method": "notifications/cancelled", "params": {"requestId": [1]}}, "params.requestId must be a string or an"),
])
def test_a_malformed_server_request_or_notification_is_told_by_field(msg, text):
    problem = server_shapes.message_problem(msg)
    assert problem is not None and text in problem, problem
    assert server_shapes.message_problem({"method": "notifications/progress",
                                          "params": {"progressToken": "p", "progress": 0.5, "total": 1}}) is None
