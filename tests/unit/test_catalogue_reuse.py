"""A rebuild reuses the entries of what did not change (catalogue.build's reuse/kept): the same
Entry, digest and validator, for the very same listed item under the same name; a new listing,
a renamed tool or a definition reshaped for clients gets a new Entry, and the catalogue is the
one a build from nothing gives."""
from __future__ import annotations

from actors.catalogue import snapshot as catalogue
from actors.catalogue.snapshot import Catalogue, Entry, ServerLists


def _tool_of(cat: Catalogue, name: str) -> Entry:
    entry = cat.tool(name)
    assert entry is not None, name
    return entry


def _tool(name: str, **extra) -> dict:
    return {"name": name, "description": f"{name} tool", "inputSchema": {"type": "object"}, **extra}


def test_unchanged_servers_keep_their_entries_and_a_new_listing_gets_new_ones():
    a = ServerLists("a", "a", (_tool("x"), _tool("y")))
    b = ServerLists("b", "b", (_tool("x"),), prompts=({"name": "p"},))
    kept: dict = {}
    first = catalogue.build({"a": a, "b": b}, "__", 1, kept=kept)
    again: dict = {}
    b2 = ServerLists("b", "b", (_tool("x", description="changed"),), prompts=b.prompts)
    second = catalogue.build({"a": a, "b": b2}, "__", 2, reuse=kept, kept=again)
    assert second.tool("a__x") is first.tool("a__x") and second.tool("a__y") is first.tool("a__y")
    assert second.prompt("b__p") is first.prompt("b__p")  # the same prompt item
    assert second.tool("b__x") is not first.tool("b__x")
    assert _tool_of(second, "b__x").definition["description"] == "changed"
    assert second.digests["tools"] != first.digests["tools"]
    fresh = catalogue.build({"a": a, "b": b2}, "__", 2)
    assert second.tool_list == fresh.tool_list and second.digests == fresh.digests
    assert set(again) == {("tool", "a", "a__x"), ("tool", "a", "a__y"), ("tool", "b", "b__x"), ("prompt", "b", "b__p")}


def test_a_collision_that_renames_a_tool_is_not_served_from_the_old_name():
    item = _tool("x")
    late = ServerLists("z", "a", (item,))  # same prefix as "a": renamed on collision
    kept: dict = {}
    alone = catalogue.build({"z": late}, "__", 1, kept=kept)
    assert _tool_of(alone, "a__x").server == "z"
    both = catalogue.build({"a": ServerLists("a", "a", (_tool("x"),)), "z": late}, "__", 2, reuse=kept)
    assert _tool_of(both, "a__x").server == "a"
    renamed = [e for e in both.tools if e.server == "z"]
    assert len(renamed) == 1 and renamed[0].name != "a__x" and renamed[0].definition["name"] == renamed[0].name


def test_a_tool_shown_with_a_rewritten_view_uri_is_rebuilt_each_time():
    view = "ui://widget/main"
    tool = _tool("show", _meta={"ui": {"resourceUri": view}})
    first_owner = ServerLists("a", "a", resources=({"uri": view},))
    second = ServerLists("b", "b", (tool,), resources=({"uri": view},))
    kept: dict = {}
    one = catalogue.build({"a": first_owner, "b": second}, "__", 1, kept=kept)
    shown = _tool_of(one, "b__show").definition["_meta"]["ui"]["resourceUri"]
    assert shown != view  # b's view URI is rewritten: a keeps it
    assert ("tool", "b", "b__show") not in kept
    two = catalogue.build({"b": second}, "__", 2, reuse=kept)
    assert _tool_of(two, "b__show").definition["_meta"]["ui"]["resourceUri"] == view
