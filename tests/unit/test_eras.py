"""A result in each era's shape: what only 2026-07-28 has is removed for a session's client, what
only 2025-11-25 has for a modern request's, and nothing else is touched."""
from __future__ import annotations

from actors.protocol import eras, mcp, modern

UPSTREAM_INFO = {"name": "upstream", "version": "1"}


def test_a_legacy_result_passes_as_the_same_object():
    result = {"content": [{"type": "text", "text": "hi"}], "_meta": {"progressToken": 3, "x/y": 1}}
    assert eras.for_legacy(result) is result
    assert eras.for_legacy({}) == {}


def test_a_modern_result_loses_its_modern_fields_for_a_legacy_client_and_keeps_the_rest():
    result = {"contents": [{"uri": "a://b", "text": "t"}], "resultType": "complete", "ttlMs": 0,
              "cacheScope": "private", "_meta": {modern.META_SERVER_INFO: UPSTREAM_INFO, "x/y": 1}}
    before = repr(result)
    shaped = eras.for_legacy(result)
    assert shaped == {"contents": [{"uri": "a://b", "text": "t"}], "_meta": {"x/y": 1}}
    assert repr(result) == before  # a copy: the outcome may be cached or shared


def test_an_emptied_meta_is_left_out_and_a_listen_s_key_goes_too():
    assert eras.for_legacy({"content": [], "_meta": {modern.META_SERVER_INFO: UPSTREAM_INFO}}) == {"content": []}
    assert eras.for_legacy({"_meta": {modern.META_SUBSCRIPTION: 7, "k": 1}}) == {"_meta": {"k": 1}}
    assert eras.for_legacy({"resultType": "complete", "_meta": "odd"}) == {"_meta": "odd"}  # not ours to judge


def test_the_lists_follow_the_modern_module_s_names():
    assert {modern.META_SERVER_INFO, modern.META_SUBSCRIPTION} == set(eras.MODERN_RESULT_META)


def test_tools_for_a_modern_client_lose_execution_only():
    plain = {"name": "a", "inputSchema": {"type": "object"}}
    tasked = {"name": "b", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"},
              "annotations": {"readOnlyHint": True}}
    tools = [plain, tasked]
    assert eras.modern_tools([plain]) == [plain]
    shaped = eras.modern_tools(tools)
    assert shaped == [plain, {"name": "b", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}]
    assert shaped[0] is plain and "execution" in tasked  # copied where changed, never changed in place


def test_finish_gives_a_modern_result_troupe_s_stamp_and_no_legacy_key():
    upstream = {"content": [], "_meta": {modern.META_SERVER_INFO: UPSTREAM_INFO,
                                         "io.modelcontextprotocol/related-task": {"taskId": "t1"}, "x/y": 1}}
    out = modern.finish("tools/call", upstream)
    assert out["resultType"] == "complete"
    assert out["_meta"] == {modern.META_SERVER_INFO: mcp.SERVER_INFO, "x/y": 1}
    assert upstream["_meta"][modern.META_SERVER_INFO] == UPSTREAM_INFO  # the outcome itself unchanged


def test_a_structured_value_that_is_no_object_stays_for_the_model_as_text_only():
    numbers = {"content": [{"type": "text", "text": "[1,2]"}], "structuredContent": [1, 2], "resultType": "complete"}
    assert eras.for_legacy(numbers) == {"content": [{"type": "text", "text": "[1,2]"}]}
    assert eras.for_legacy({"content": [], "structuredContent": "two"}) == {"content": [{"type": "text", "text": '"two"'}]}
    assert eras.for_legacy({"content": [], "structuredContent": None}) == {"content": []}
    kept = {"content": [], "structuredContent": {"sum": 3}}
    assert eras.for_legacy(kept) is kept


def test_tools_for_a_legacy_client_lose_an_output_schema_that_is_no_object_schema():
    obj = {"name": "a", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}
    arr = {"name": "b", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}}
    bare = {"name": "c", "inputSchema": {"type": "object"}}
    tools = (obj, bare)
    assert eras.legacy_tools(tools) is tools
    shaped = eras.legacy_tools((obj, arr, bare))
    assert shaped == [obj, {"name": "b", "inputSchema": {"type": "object"}}, bare] and shaped[0] is obj
    assert arr["outputSchema"] == {"type": "array"}


def test_the_catalogue_lists_each_era_its_own_definitions_once_per_snapshot():
    from actors.catalogue.snapshot import ServerLists, build
    tasked = {"name": "t", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "optional"}}
    arr = {"name": "n", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}}
    cat = build({"s": ServerLists("s", "s", (tasked, arr))}, "__", 1)
    assert [t.get("execution") for t in cat.legacy_tool_list] == [None, {"taskSupport": "optional"}]
    assert [t.get("outputSchema") for t in cat.legacy_tool_list] == [None, None]
    assert [t.get("outputSchema") for t in cat.modern_tool_list] == [{"type": "array"}, None]
    assert all("execution" not in t for t in cat.modern_tool_list)
    assert cat.modern_tool_list is cat.modern_tool_list  # computed once
