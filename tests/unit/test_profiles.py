"""Profiles and serve.clients: parsing (with every problem named, never a token), and the view a
profile cuts from a catalogue (servers, allow/deny globs, read-only, withheld, digests)."""
from __future__ import annotations

import pytest

from actors.catalogue import views
from actors.catalogue.snapshot import ServerLists, build
from actors.settings import config


def _catalogue():
    reads = {"readOnlyHint": True}
    lists = {
        "gh": ServerLists("gh", "gh", tools=({"name": "get_issue", "annotations": reads},
                                             {"name": "create_issue"}, {"name": "get_pr", "annotations": reads}),
                          prompts=({"name": "review"},), resources=({"uri": "gh://readme"},),
                          withheld=(("tools", "delete_repo"),)),
        "fs": ServerLists("fs", "fs", tools=({"name": "read", "annotations": reads}, {"name": "write"}),
                          resources=({"uri": "file:///a"},)),
    }
    return build(lists, "__", 3)


def test_an_empty_profile_or_none_is_the_catalogue_itself():
    cat = _catalogue()
    assert views.view(cat, None) is cat
    assert views.view(cat, views.Profile("all")) is cat


def test_servers_globs_and_read_only_cut_the_view():
    cat = _catalogue()
    only_gh = views.view(cat, views.Profile("gh", servers=frozenset({"gh"})))
    assert {e.name for e in only_gh.tools} == {"gh__get_issue", "gh__create_issue", "gh__get_pr"}
    assert [r.uri for r in only_gh.resources] == ["gh://readme"] and only_gh.servers == ("gh",)
    assert only_gh.tool("fs__read") is None and only_gh.resource_owner("file:///a") is None
    assert only_gh.version == cat.version  # cursors and notices keep their meaning
    globbed = views.view(cat, views.Profile("g", allow=("gh__get_*", "fs__*"), deny=("fs__write",)))
    assert {e.name for e in globbed.tools} == {"gh__get_issue", "gh__get_pr", "fs__read"}
    assert [t["name"] for t in globbed.tool_list] == [e.name for e in globbed.tools]
    assert globbed.withheld_tool("gh__delete_repo") is None  # a hidden withheld tool is unknown, not "withheld"
    readers = views.view(cat, views.Profile("r", read_only=True))
    assert {e.name for e in readers.tools} == {"gh__get_issue", "gh__get_pr", "fs__read"}


def test_the_views_of_configured_profiles_are_built_with_the_snapshot_and_shared():
    profile = views.Profile("r", read_only=True)
    published = views.with_views(_catalogue(), (profile, views.Profile("all")))  # what the Registry publishes
    assert set(published.views) == {profile}  # an empty profile is the catalogue itself: nothing to build
    readers = views.view(published, views.Profile("r", read_only=True))  # an equal profile finds it
    assert readers is published.views[profile] and views.view(published, profile) is readers
    assert {e.name for e in readers.tools} == {"gh__get_issue", "gh__get_pr", "fs__read"}
    # Its entries are the catalogue's own objects: a validator or digest built for one is built for all.
    assert all(e is published.tool(e.name) for e in readers.tools)
    assert readers.digests["tools"] != published.digests["tools"] and not readers.views


def test_passthrough_only_when_nothing_of_the_server_is_hidden():
    assert views.Profile("a", servers=frozenset({"gh"})).passes_through("gh")
    assert not views.Profile("a", servers=frozenset({"gh"})).passes_through("fs")
    assert not views.Profile("a", allow=("gh__*",)).passes_through("gh")
    assert not views.Profile("a", read_only=True).passes_through("gh")


def test_digests_change_only_with_what_the_view_shows():
    cat = _catalogue()
    profile = views.Profile("fs", servers=frozenset({"fs"}))
    before = views.digest(views.view(cat, profile), "tools")
    lists = {"gh": ServerLists("gh", "gh", tools=({"name": "brand_new"},)),
             "fs": ServerLists("fs", "fs", tools=({"name": "read", "annotations": {"readOnlyHint": True}},
                                                  {"name": "write"}))}
    changed_elsewhere = build(lists, "__", 4)
    assert views.digest(views.view(changed_elsewhere, profile), "tools") == before
    assert views.digest(views.view(changed_elsewhere, views.Profile("gh", servers=frozenset({"gh"}))), "tools") \
        != views.digest(views.view(cat, views.Profile("gh", servers=frozenset({"gh"}))), "tools")


def test_profiles_and_clients_parse(monkeypatch):
    monkeypatch.setenv("BOB_TOKEN", "bob-secret")
    c = config.from_data({"servers": [], "profiles": {"r": {"servers": ["gh"], "tools": {"allow": ["gh__*"]},
                                                             "read_only": True}, "all": {}},
                          "serve": {"clients": [{"name": "alice", "token": "alice-secret", "profile": "r"},
                                                {"name": "bob", "token_env": "BOB_TOKEN"}], "profile": "all"}})
    alice, bob = c.serve.clients
    assert (alice.name, alice.token, alice.profile) == ("alice", "alice-secret", "r")
    assert (bob.token, bob.profile) == ("bob-secret", None)
    assert "secret" not in repr(c.serve) + repr(alice) + repr(bob)
    assert c.profile("r") == views.Profile("r", frozenset({"gh"}), ("gh__*",), (), True)
    assert c.profile("all").everything and c.serve.profile == "all"
    assert c.profile("all").max_sessions == 100  # the default quota of sessions per client


def test_a_profiles_session_quota_is_a_positive_whole_number():
    quiet = config.from_data({"servers": [], "profiles": {"bots": {"max_sessions": 7}}})
    assert quiet.profile("bots").max_sessions == 7 and quiet.profile("bots").everything  # no view rule
    for bad in (0, -1, "many", 2.5):
        with pytest.raises(config.ConfigError, match=r"profiles\.bots\.max_sessions"):
            config.from_data({"servers": [], "profiles": {"bots": {"max_sessions": bad}}})


def test_profile_and_client_mistakes_are_all_reported_and_never_quote_a_token(monkeypatch):
    monkeypatch.delenv("NOPE_TOKEN", raising=False)
    with pytest.raises(config.ConfigError) as caught:
        config.from_data({"servers": [], "profiles": {"p": {"servers": "gh", "tools": {"allow": [""], "only": 1}},
                                                       "q": ["x"]},
                          "serve": {"profile": "zz", "clients": [
                              {"name": "a", "token": "same-secret-1"}, {"name": "a", "token": "same-secret-1"},
                              {"name": "b", "token_env": "NOPE_TOKEN", "profile": "missing"},
                              {"name": "c", "token": "t", "token_env": "X"}, {"token": "x"}]}})
    text = "\n".join(caught.value.problems)
    for expected in ("profiles.p.servers", "profiles.p.tools.allow[0]", "profiles.p.tools.only", "profiles.q",
                     "serve.profile: no profile named 'zz'", "duplicate client name 'a'", "the same token",
                     "$NOPE_TOKEN is not set", "no profile named 'missing'", "exactly one of token and token_env",
                     "every client needs a name"):
        assert expected in text, (expected, text)
    assert "same-secret-1" not in text


def test_with_overrides_checks_the_profile_name():
    base = config.from_data({"servers": [], "profiles": {"r": {}}})
    assert config.with_overrides(base, profile="r").serve.profile == "r"
    with pytest.raises(config.ConfigError, match="no profile named 'nope'"):
        config.with_overrides(base, profile="nope")
