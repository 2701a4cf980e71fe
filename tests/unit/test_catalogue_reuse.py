"""A rebuild reuses the entries of what did not change (catalogue.build's reuse/kept): the same
Entry, digest and validator, for the very same listed item under the same name; a new listing,
a renamed tool or a definition reshaped for clients gets a new Entry, and the catalogue is the
one a build from nothing gives."""
from __future__ import annotations

import random

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
    items = {key for key in again if key[0] != "block"}
    assert items == {("tool", "a", "a__x"), ("tool", "a", "a__y"), ("tool", "b", "b__x"), ("prompt", "b", "b__p")}


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


def _shape(cat: Catalogue) -> tuple:
    """What a client and the status report can see of a catalogue."""
    return (tuple((e.name, e.server, e.original) for e in cat.tools),
            tuple((e.name, e.server, e.original) for e in cat.prompts), cat.collisions, cat.tool_list,
            cat.digests, cat.app_only)


def test_a_server_whose_listing_did_not_change_is_taken_whole_and_the_catalogue_is_a_fresh_builds():
    a = ServerLists("a", "a", (_tool("x"), _tool("y"), _tool("x")))  # listed twice: its own collision line
    b = ServerLists("b", "b", (_tool("z"),))
    kept: dict = {}
    first = catalogue.build({"a": a}, "__", 1, kept=kept)
    assert ("block", "tool", "a") in kept
    again: dict = {}
    second = catalogue.build({"a": a, "b": b}, "__", 2, reuse=kept, kept=again)
    assert second.tool("a__x") is first.tool("a__x") and again[("block", "tool", "a")] is kept[("block", "tool", "a")]
    assert _shape(second) == _shape(catalogue.build({"a": a, "b": b}, "__", 2))
    assert any("listed twice" in line for line in second.collisions)


def test_a_block_whose_name_an_earlier_server_now_takes_is_named_again():
    late = ServerLists("z", "a", (_tool("x"), _tool("w")))  # prefix "a": collides with server "a" once it comes
    kept: dict = {}
    catalogue.build({"z": late}, "__", 1, kept=kept)
    both = catalogue.build({"a": ServerLists("a", "a", (_tool("x"),)), "z": late}, "__", 2, reuse=kept)
    assert _shape(both) == _shape(catalogue.build({"a": ServerLists("a", "a", (_tool("x"),)), "z": late}, "__", 2))
    assert _tool_of(both, "a__x").server == "a" and _tool_of(both, "a__w").server == "z"


def test_rebuilds_from_kept_blocks_always_equal_a_build_from_nothing():
    """Servers come, change, collide (shared prefixes, troupe's own names, a view URI two servers
    use) and go, in a seeded random order: each rebuild from the last one's `kept` gives exactly
    the catalogue a build from nothing gives."""
    rng = random.Random(31)
    reserved = frozenset({"list_tools", "p0__t1"})
    names = ["t0", "t1", "t2", "t3", "list_tools"]

    def listing(server: str) -> ServerLists:
        tools = tuple(_tool(rng.choice(names), description=rng.choice(["a", "b"]),
                            **({"_meta": {"ui": {"resourceUri": "ui://v"}}} if rng.random() < 0.1 else {}))
                      for _ in range(rng.randint(0, 5)))
        resources = ({"uri": "ui://v"},) if rng.random() < 0.2 else ()
        prompts = tuple({"name": rng.choice(names)} for _ in range(rng.randint(0, 2)))
        return ServerLists(server, rng.choice(["p0", "p1", server, ""]), tools, resources, prompts=prompts)

    lists: dict = {}
    kept: dict = {}
    for version in range(1, 400):
        server = rng.choice(["s0", "s1", "s2", "s3", "s4"])
        if server in lists and rng.random() < 0.15:
            del lists[server]
        elif server not in lists or rng.random() < 0.6:
            lists[server] = listing(server)
        next_kept: dict = {}
        rebuilt = catalogue.build(lists, "__", version, reserved, reuse=kept, kept=next_kept)
        kept = next_kept
        assert _shape(rebuilt) == _shape(catalogue.build(lists, "__", version, reserved)), version
