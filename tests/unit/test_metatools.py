"""Meta-tool handlers over a Catalogue snapshot: paging, ranking, filters, errors."""
from __future__ import annotations

import json

import pytest

from actors.catalogue import snapshot as catalogue
from actors.downstream import metatools


def _cat(n_extra: int = 0):
    a = [{"name": "read_file", "description": "Read a file from disk", "inputSchema": {"type": "object",
          "properties": {"path": {"type": "string"}}, "required": ["path"]}},
         {"name": "search", "description": "Search files for text, then read file parts", "inputSchema": {}}]
    b = [{"name": f"t{i:05d}", "description": f"tool number {i}", "inputSchema": {}} for i in range(n_extra)]
    b.append({"name": "weather", "description": "Forecast for a city", "inputSchema": {}})
    return catalogue.build({"fs": catalogue.ServerLists("fs", "fs", tuple(a)),
                            "misc": catalogue.ServerLists("misc", "misc", tuple(b))}, "__", 1)


def _json(result):
    assert not result.get("isError"), result
    return json.loads(result["content"][0]["text"])


def test_list_tools_pages_with_totals():
    cat = _cat(120)
    first = _json(metatools.handle("list_tools", {"limit": 50}, cat))
    assert first["total"] == 123 and len(first["tools"]) == 50 and first["truncated"] is True
    last = _json(metatools.handle("list_tools", {"limit": 50, "offset": 100}, cat))
    assert len(last["tools"]) == 23 and last["truncated"] is False
    with pytest.raises(metatools.MetaError):
        metatools.handle("list_tools", {"limit": 0}, cat)


def test_filter_ranks_name_matches_first_and_filters():
    cat = _cat(50)
    ranked = _json(metatools.handle("filter_tools", {"query": "read file"}, cat))
    assert ranked["tools"][0]["name"] == "fs__read_file"  # name beats a description mention
    assert {t["name"] for t in ranked["tools"]} == {"fs__read_file", "fs__search"}
    globbed = _json(metatools.handle("filter_tools", {"pattern": "misc__t0001*"}, cat))
    assert globbed["total"] == 10
    contains = _json(metatools.handle("filter_tools", {"pattern": "WEATH"}, cat))
    assert [t["name"] for t in contains["tools"]] == ["misc__weather"]
    scoped = _json(metatools.handle("filter_tools", {"query": "tool", "server": "fs"}, cat))
    assert scoped["total"] == 0
    paged = _json(metatools.handle("filter_tools", {"query": "tool number", "limit": 5, "offset": 5}, cat))
    assert paged["total"] == 50 and len(paged["tools"]) == 5 and paged["truncated"] is True


def test_describe_tool_gives_schema_and_example_or_a_clear_error():
    cat = _cat()
    described = _json(metatools.handle("describe_tool", {"name": "fs__read_file"}, cat))
    assert described["tool"]["inputSchema"]["required"] == ["path"]
    assert described["example"] == {"name": "call_tool", "arguments": {"name": "fs__read_file",
                                                                       "arguments": {"path": "text"}}}
    with pytest.raises(metatools.MetaError, match="unknown tool"):
        metatools.handle("describe_tool", {"name": "nope"}, cat)


def _own():
    from actors.downstream import coretools
    return metatools.OwnTools.of(coretools.listed(False))


def test_list_tools_shows_troupes_own_tools_last_marked_as_troupes():
    cat, own = _cat(120), _own()
    first = _json(metatools.handle("list_tools", {"limit": 50}, cat, own))
    assert first["total"] == 123 + len(own.entries) and all(t["server"] != "(troupe)" for t in first["tools"])
    last = _json(metatools.handle("list_tools", {"limit": 50, "offset": 123}, cat, own))
    assert [t["name"] for t in last["tools"]] == [e.name for e in own.entries] and last["truncated"] is False
    across = _json(metatools.handle("list_tools", {"limit": 5, "offset": 121}, cat, own))  # a page on the seam
    assert [t["server"] for t in across["tools"]] == ["misc", "misc", "(troupe)", "(troupe)", "(troupe)"]
    assert [t["name"] for t in across["tools"][2:]] == [e.name for e in own.entries[:3]]
    status = next(t for t in last["tools"] if t["name"] == "core_status")
    assert status["server"] == "(troupe)" and status["description"].startswith("troupe's status report")
    assert _json(metatools.handle("list_tools", {}, cat))["total"] == 123  # a client that sees none


def test_filter_tools_finds_troupes_own_tools_by_query_pattern_and_server():
    cat, own = _cat(50), _own()
    found = _json(metatools.handle("filter_tools", {"query": "status report of every server"}, cat, own))
    assert found["tools"][0]["name"] == "core_status" and found["tools"][0]["server"] == "(troupe)"
    ranked = _json(metatools.handle("filter_tools", {"query": "read file"}, cat, own))
    assert ranked["tools"][0]["name"] == "fs__read_file"  # a server's tool still ranks where it did
    globbed = _json(metatools.handle("filter_tools", {"pattern": "core_mcpserver_*"}, cat, own))
    assert {t["name"] for t in globbed["tools"]} == {"core_mcpserver_list", "core_mcpserver_get",
                                                     "core_mcpserver_register"}
    mine = _json(metatools.handle("filter_tools", {"server": "(troupe)", "limit": 100}, cat, own))
    assert [t["name"] for t in mine["tools"]] == [e.name for e in own.entries]
    assert _json(metatools.handle("filter_tools", {"server": "fs"}, cat, own))["total"] == 2


def test_list_core_tools_names_them_and_how_to_call_them():
    own = _own()
    listed = _json(metatools.handle("list_core_tools", {}, _cat(), own))
    assert listed["total"] == len(own.entries) and {t["server"] for t in listed["tools"]} == {"(troupe)"}
    assert "core_status" in {t["name"] for t in listed["tools"]} and listed["call"].startswith("call_tool")
    assert "core_service_stop" not in {t["name"] for t in listed["tools"]}  # an operator act, off by default


def test_meta_tool_descriptions_say_where_troupes_own_tools_are():
    described = {t["name"]: t["description"] for t in metatools.META_TOOLS}
    assert len(described) == 11
    for name in ("list_tools", "filter_tools", "list_core_tools", "call_tool", "describe_tool"):
        assert "core_" in described[name], name
    assert "call_tool" in described["list_core_tools"] and "tools/list" in described["list_core_tools"]
