"""The stateless 2026-07-28 revision as troupe serves it: _meta checks, removed methods, result fields."""
from __future__ import annotations

from actors.protocol import jsonrpc, mcp, modern

ENVELOPE = {modern.META_VERSION: mcp.MODERN, modern.META_CAPABILITIES: {}}


def params(**meta) -> dict:
    return {"name": "x", "_meta": {**ENVELOPE, **meta}}


def test_a_request_is_modern_only_when_its_meta_names_a_version():
    assert modern.is_modern(params())
    assert not modern.is_modern({"name": "x", "_meta": {"progressToken": 1}})
    assert not modern.is_modern({"name": "x"}) and not modern.is_modern(None)


def test_a_complete_envelope_passes_and_each_fault_has_the_revisions_code():
    assert modern.check_meta(1, "tools/call", params(**{modern.META_LOG_LEVEL: "info"})) is None
    unsupported = modern.check_meta(1, "tools/call", params(**{modern.META_VERSION: "2099-01-01"}))
    assert unsupported["error"]["code"] == modern.UNSUPPORTED_VERSION == -32022
    assert unsupported["error"]["data"] == {"supported": [mcp.MODERN], "requested": "2099-01-01"}
    no_caps = {"_meta": {modern.META_VERSION: mcp.MODERN}}
    assert modern.check_meta(1, "tools/list", no_caps)["error"]["code"] == jsonrpc.INVALID_PARAMS
    bad_level = modern.check_meta(1, "tools/list", params(**{modern.META_LOG_LEVEL: "loud"}))
    assert bad_level["error"]["code"] == jsonrpc.INVALID_PARAMS
    bad_info = modern.check_meta(1, "tools/list", params(**{modern.META_CLIENT_INFO: "me"}))
    assert bad_info["error"]["code"] == jsonrpc.INVALID_PARAMS


def test_methods_the_revision_removed_are_not_found():
    for method in ("ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "initialize"):
        assert modern.check_meta(7, method, params())["error"]["code"] == jsonrpc.METHOD_NOT_FOUND, method


def test_results_carry_result_type_server_info_and_caching_hints():
    listed = modern.finish("tools/list", {"tools": []})
    assert listed["resultType"] == "complete" and listed["cacheScope"] == "public" and listed["ttlMs"] > 0
    assert listed["_meta"][modern.META_SERVER_INFO] == mcp.SERVER_INFO
    read = modern.finish("resources/read", {"contents": [], "ttlMs": 99, "cacheScope": "public"})
    assert (read["ttlMs"], read["cacheScope"]) == (0, "private")  # an upstream's answer is never shared
    called = modern.finish("tools/call", {"content": [], "_meta": {"k": 1}})
    assert "ttlMs" not in called and called["_meta"]["k"] == 1


def test_the_finishing_sink_touches_only_its_own_result():
    out = []
    sink = modern.finishing_sink(5, "tools/call", out.append)
    sink(jsonrpc.result(5, {"content": []}))
    sink(jsonrpc.result(6, {"content": []}))
    sink({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
    sink(jsonrpc.error(5, -1, "no"))
    assert out[0]["result"]["resultType"] == "complete" and "resultType" not in out[1]["result"]
    assert out[2]["method"] == "notifications/progress" and out[3]["error"]["message"] == "no"


def test_the_envelope_stays_with_troupe_and_other_meta_goes_upstream():
    forwarded = modern.without_envelope({"name": "t", "_meta": {**ENVELOPE, "progressToken": 3}})
    assert forwarded == {"name": "t", "_meta": {"progressToken": 3}}
    assert modern.without_envelope({"name": "t", "_meta": dict(ENVELOPE)}) == {"name": "t"}


def test_discover_lists_modern_first_then_every_legacy_version():
    result = modern.discover_result("hi")
    assert result["supportedVersions"] == [mcp.MODERN, *mcp.SUPPORTED_VERSIONS]
    assert result["resultType"] == "complete" and result["cacheScope"] == "public" and result["ttlMs"] > 0
    assert result["serverInfo"]["name"] == "troupe" and result["instructions"] == "hi"
