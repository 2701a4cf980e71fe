"""troupe's own tool names (meta-tools, core tools) are never a server's: catalogue.build renames a
server's tool that would take one, deterministically and reported; describe_tool and the flat
mode's refusal answer about troupe's own."""
from __future__ import annotations

import re

import orjson
import pytest

from actors.catalogue import snapshot as catalogue
from actors.downstream import coretools, metatools
from actors.downstream.tool_calls import _reserved_message

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESERVED = coretools.RESERVED_NAMES


def _tools(*names: str) -> tuple:
    return tuple({"name": n, "inputSchema": {"type": "object"}} for n in names)


def _build(lists: dict) -> catalogue.Catalogue:
    return catalogue.build(lists, "__", 1, RESERVED)


def test_every_meta_and_core_tool_name_is_reserved():
    assert {"list_tools", "describe_tool", "filter_tools", "list_core_tools", "call_tool", "list_resources",
            "describe_resource", "get_resource", "list_prompts", "describe_prompt", "get_prompt"} <= RESERVED
    assert {"core_status", "core_mcpserver_list", "core_service_stop", "core_workflow_list"} <= RESERVED
    assert RESERVED == metatools.META_NAMES | coretools.CORE_NAMES


def test_an_unprefixed_server_tool_with_troupes_name_is_renamed_and_reported():
    cat = _build({"imp": catalogue.ServerLists("imp", "", _tools("core_status", "call_tool", "echo"))})
    assert cat.tool("core_status") is None and cat.tool("call_tool") is None
    assert cat.tool("echo").server == "imp"  # an ordinary name is untouched
    renamed = {e.original: e for e in cat.tools if e.original != e.name}
    assert set(renamed) == {"core_status", "call_tool"}
    for original, entry in renamed.items():
        assert SAFE.match(entry.name) and entry.name.startswith(original + "_") and entry.name not in RESERVED
        assert entry.definition["name"] == entry.name  # what flat mode lists
        assert f"tool {original!r} of imp renamed {entry.name!r} (troupe's own tool keeps it)" in cat.collisions
    assert [d["name"] for d in cat.tool_list] == [e.name for e in cat.tools]


def test_a_prefixed_name_is_not_troupes():
    cat = _build({"srv": catalogue.ServerLists("srv", "srv", _tools("core_status"))})
    assert cat.tool("srv__core_status").original == "core_status" and not cat.collisions


def test_the_rename_is_the_same_whatever_the_order_and_never_collides():
    def lists(order):
        return {s: catalogue.ServerLists(s, "", _tools("core_status", "list_tools")) for s in order}
    one, two = _build(lists(["b", "a"])), _build(lists(["a", "b"]))
    assert [(t.server, t.name) for t in one.tools] == [(t.server, t.name) for t in two.tools]
    names = [t.name for t in one.tools]
    assert len(set(names)) == 4 and not set(names) & RESERVED
    # the rename does not depend on which other servers exist
    alone = _build({"a": catalogue.ServerLists("a", "", _tools("core_status"))})
    assert alone.tools[0].name == next(t.name for t in one.tools if t.server == "a" and t.original == "core_status")


def test_a_server_tool_already_named_like_the_rename_keeps_names_unique():
    first = _build({"a": catalogue.ServerLists("a", "", _tools("core_status"))}).tools[0].name
    for servers in (("a", "b"), ("b", "a")):  # b lists, as its own, the name a's tool is renamed to
        lists = {"a": catalogue.ServerLists("a", "", _tools("core_status")),
                 "b": catalogue.ServerLists("b", "", _tools(first))}
        cat = _build({s: lists[s] for s in servers})
        names = [t.name for t in cat.tools]
        assert len(names) == len(set(names)) == 2 and not set(names) & RESERVED


def test_a_reserved_name_listed_twice_is_kept_once():
    cat = _build({"imp": catalogue.ServerLists("imp", "", _tools("core_status", "core_status"))})
    assert len(cat.tools) == 1 and cat.tools[0].original == "core_status"
    assert "tool 'core_status' listed twice by imp; second ignored" in cat.collisions


def test_a_withheld_tool_with_troupes_name_would_be_renamed_too():
    lists = {"imp": catalogue.ServerLists("imp", "", withheld=(("tools", "core_status"),))}
    cat = _build(lists)
    assert cat.withheld_tool("core_status") is None
    (key, held), = cat.withheld.items()
    assert held.original == "core_status" and key[1] == held.name and held.name.startswith("core_status_")


def test_prompts_are_not_tools():
    cat = _build({"imp": catalogue.ServerLists("imp", "", prompts=({"name": "call_tool"},))})
    assert cat.prompt("call_tool").server == "imp" and not cat.collisions


def test_describe_tool_shows_troupes_own_never_the_servers():
    cat = _build({"imp": catalogue.ServerLists("imp", "", _tools("core_status", "list_tools"))})
    core = metatools.OwnTools.of(coretools.listed(False))
    shown = orjson.loads(metatools.handle("describe_tool", {"name": "core_status"}, cat, core)["content"][0]["text"])
    assert shown["server"] == "(troupe)" and shown["tool"] == coretools.BY_NAME["core_status"]
    assert shown["example"] == {"name": "call_tool", "arguments": {"name": "core_status", "arguments": {}}}
    meta = orjson.loads(metatools.handle("describe_tool", {"name": "list_tools"}, cat, core)["content"][0]["text"])
    assert meta["server"] == "(troupe)" and meta["example"]["name"] == "list_tools"
    with pytest.raises(metatools.MetaError, match="unknown tool 'core_status'"):  # a core tool this client cannot see
        metatools.handle("describe_tool", {"name": "core_status"}, cat)


def test_the_refusal_names_the_servers_tool_new_name():
    cat = _build({"imp": catalogue.ServerLists("imp", "", _tools("call_tool"))})
    new = cat.tools[0].name
    flat = _reserved_message("call_tool", "flat", cat)
    assert "meta-tool" in flat and new in flat
    assert "not available to this client" in _reserved_message("core_status", "flat", cat)
