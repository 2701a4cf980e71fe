"""Naming policy and the catalogue snapshot: LLM-safe names, deterministic collisions, URI rewrites."""
from __future__ import annotations

import re

from actors.catalogue import snapshot as catalogue, naming

SAFE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def test_qualified_names_are_llm_safe_and_stable():
    assert naming.qualify("github", "__", "create_issue") == "github__create_issue"
    assert naming.qualify("", "__", "echo") == "echo"
    dotted = naming.qualify("fs", "__", "read.file v2")
    assert SAFE.match(dotted) and dotted.startswith("fs__read_file_v2")
    long = naming.qualify("a-very-long-server-name", "__", "x" * 100)
    assert SAFE.match(long) and len(long) == 64
    assert long == naming.qualify("a-very-long-server-name", "__", "x" * 100)  # stable
    assert long != naming.qualify("a-very-long-server-name", "__", "x" * 101)  # hash tells them apart


def test_uri_rewrite_round_trips():
    uri = "file:///tmp/a b?x=1"
    rewritten = naming.rewrite_uri("srv.one", uri)
    assert naming.unrewrite_uri(rewritten) == ("srv.one", uri)
    assert naming.unrewrite_uri("file:///x") is None


def _lists(order):
    tools = ({"name": "echo", "inputSchema": {}},)
    res = ({"uri": "mem://shared", "name": "s"},)
    return {name: catalogue.ServerLists(name, "", tools, res) for name in order}


def test_collisions_resolve_the_same_way_whatever_the_arrival_order():
    one = catalogue.build(_lists(["beta", "alpha"]), "__", 1)
    two = catalogue.build(_lists(["alpha", "beta"]), "__", 2)
    assert [t.name for t in one.tools] == [t.name for t in two.tools]
    assert one.tool("echo").server == "alpha"  # servers in name order: the first keeps the name
    renamed = next(t for t in one.tools if t.server == "beta")
    assert renamed.name != "echo" and SAFE.match(renamed.name) and renamed.original == "echo"
    assert len(one.collisions) == 2  # the tool and the resource, both reported
    shown = {r.server: r.uri for r in one.resources}
    assert shown["alpha"] == "mem://shared"
    assert one.resource_owner(shown["beta"]) == ("beta", "mem://shared")


def test_templates_route_reads_to_their_server():
    lists = {"a": catalogue.ServerLists("a", "a", templates=({"uriTemplate": "item://{id}/detail", "name": "t"},)),
             "b": catalogue.ServerLists("b", "b", resources=({"uri": "doc://b/1", "name": "d"},))}
    cat = catalogue.build(lists, "__", 1)
    assert cat.resource_owner("item://42/detail") == ("a", "item://42/detail")
    assert cat.resource_owner("doc://b/2") == ("b", "doc://b/2")  # the only server of that scheme
    assert cat.resource_owner("nope://x") is None
