"""MCP Apps in the catalogue and on the wire: views of several servers under URIs of their own,
tools' references rewritten to them, app-only tools, and the apps capability troupe relays."""
from __future__ import annotations

from actors.catalogue import apps, naming
from actors.catalogue import snapshot as catalogue
from actors.catalogue.views import Profile, view
from actors.downstream import metatools
from actors.protocol import mcp, modern, modern_client

VIEW = "ui://board/view.html"


def _tool(name: str, ui: dict | None = None, **meta) -> dict:
    out: dict = {"name": name, "inputSchema": {"type": "object"}}
    if ui is not None or meta:
        out["_meta"] = {**({"ui": ui} if ui is not None else {}), **meta}
    return out


def _server(name: str, listed: bool = True) -> catalogue.ServerLists:
    tools = (_tool("show", {"resourceUri": VIEW, "visibility": ["model", "app"], "csp": {"connectDomains": ["x"]}}),
             _tool("refresh", {"resourceUri": VIEW, "visibility": ["app"]}),
             _tool("plain"))
    resources = ({"uri": VIEW, "name": "view", "mimeType": mcp.UI_MIME_TYPE},) if listed else ()
    return catalogue.ServerLists(name, name, tools, resources)


def _ui(cat, name: str) -> dict:
    return cat.tool(name).definition["_meta"]["ui"]


def test_two_servers_with_one_view_uri_each_reach_their_own_view_listed_or_not():
    for beta_listed in (True, False):
        for alpha_listed in (True, False):
            cat = catalogue.build({"alpha": _server("alpha", alpha_listed), "beta": _server("beta", beta_listed)},
                                  "__", 1)
            assert _ui(cat, "alpha__show")["resourceUri"] == VIEW  # the first server keeps the URI
            rewritten = _ui(cat, "beta__show")["resourceUri"]
            assert rewritten == "ui://troupe/beta/board/view.html"  # hosts render ui:// views only
            assert _ui(cat, "beta__refresh")["resourceUri"] == rewritten
            assert cat.resource_owner(VIEW) == ("alpha", VIEW)
            assert cat.resource_owner(rewritten) == ("beta", VIEW)
            # the rest of the tool's ui metadata is the server's, untouched
            assert _ui(cat, "beta__show")["csp"] == {"connectDomains": ["x"]}
            assert _ui(cat, "beta__show")["visibility"] == ["model", "app"]
            # a view only a tool names is routed, never added to resources/list
            assert {r.uri for r in cat.resources} == ({VIEW} if alpha_listed else set()) | (
                {rewritten} if beta_listed else set())


def test_a_server_listed_view_another_server_only_references_still_stays_apart():
    # alpha (first) names the view without listing it; beta lists it: beta's is the rewritten one
    cat = catalogue.build({"alpha": _server("alpha", listed=False), "beta": _server("beta")}, "__", 1)
    assert [r.uri for r in cat.resources] == ["ui://troupe/beta/board/view.html"]
    assert cat.resource_owner(VIEW) == ("alpha", VIEW)
    assert any("shown as 'ui://troupe/beta/board/view.html'" in line for line in cat.collisions)


def test_the_deprecated_flat_key_is_rewritten_too_and_upstream_dicts_are_not_changed():
    old = _tool("legacy_view", **{"ui/resourceUri": VIEW})
    lists = {"alpha": _server("alpha"), "beta": catalogue.ServerLists("beta", "beta", (old,), ())}
    cat = catalogue.build(lists, "__", 1)
    assert cat.tool("beta__legacy_view").definition["_meta"]["ui/resourceUri"] == "ui://troupe/beta/board/view.html"
    assert old["_meta"]["ui/resourceUri"] == VIEW
    assert cat.resource_owner("ui://troupe/beta/board/view.html") == ("beta", VIEW)


def test_app_only_tools_are_known_and_kept_out_of_the_models_meta_lists():
    cat = catalogue.build({"alpha": _server("alpha")}, "__", 1)
    assert cat.app_only == frozenset({"alpha__refresh"})
    listed = metatools.handle("list_tools", {}, cat)
    names = {t["name"] for t in metatools.orjson.loads(listed["content"][0]["text"])["tools"]}
    assert names == {"alpha__show", "alpha__plain"}
    found = metatools.handle("filter_tools", {"pattern": "alpha"}, cat)
    assert "alpha__refresh" not in found["content"][0]["text"]
    described = metatools.orjson.loads(metatools.handle("describe_tool", {"name": "alpha__refresh"}, cat)
                                       ["content"][0]["text"])
    assert described["tool"]["_meta"]["ui"] == {"resourceUri": VIEW, "visibility": ["app"]}
    # visibility absent or naming the model: for the model too
    assert not apps.app_only(_tool("x")) and not apps.app_only(_tool("x", {"visibility": ["model"]}))
    assert apps.app_only(_tool("x", {"visibility": []}))


def test_a_profile_view_keeps_only_its_servers_views():
    cat = catalogue.build({"alpha": _server("alpha", listed=False), "beta": _server("beta", listed=False)}, "__", 1)
    cut = view(cat, Profile("only-beta", servers=frozenset({"beta"})))
    assert cut.resource_owner("ui://troupe/beta/board/view.html") == ("beta", VIEW)
    assert cut.resource_owner(VIEW) is None


def test_ui_rewrites_round_trip_and_other_schemes_keep_their_form():
    assert naming.unrewrite_uri(naming.rewrite_uri("my server", VIEW)) == ("my server", VIEW)
    assert naming.rewrite_uri("s", "mem://x").startswith("troupe://")
    assert naming.unrewrite_uri("ui://troupe/") is None


def test_troupe_declares_apps_upstream_and_relays_a_clients_own_declaration():
    fixed = mcp.relayed_client_capabilities()
    assert fixed["extensions"] == {mcp.UI_EXTENSION: {"mimeTypes": [mcp.UI_MIME_TYPE]}}
    assert modern_client.relayable(fixed)["extensions"] == fixed["extensions"]  # troupe's own requests
    host = {"sampling": {}, "extensions": {mcp.UI_EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"],
                                                              "features": ["streaming"]},
                                           "com.example/other": {}}}
    assert modern_client.relayable(host) == {"sampling": {}, "extensions": {
        mcp.UI_EXTENSION: {"mimeTypes": ["text/html;profile=mcp-app"], "features": ["streaming"]}}}
    assert modern_client.relayable({"extensions": {mcp.UI_EXTENSION: "yes"}}) == {}  # not an object: dropped
    assert apps.takes_apps(host) and not apps.takes_apps({}) and not apps.takes_apps({"extensions": []})
    # and troupe tells its own clients it carries apps, in both eras
    assert mcp.UI_EXTENSION in mcp.SESSION_CAPABILITIES["extensions"]
    assert mcp.UI_EXTENSION in modern.capabilities()["extensions"]
