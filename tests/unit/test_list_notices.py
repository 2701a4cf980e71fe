"""What a client has of each list decides its list_changed notices: only a list that differs from
the one it was shown, once, and never for a kind it never listed."""
from __future__ import annotations

from actors.catalogue.snapshot import ServerLists, build
from actors.downstream.list_notices import ShownLists, kinds_of


def _cat(version: int, tools: tuple = ("a",), templates: tuple = ()):
    return build({"s": ServerLists("s", "s", tools=tuple({"name": t} for t in tools),
                                   templates=tuple({"uriTemplate": u, "name": u} for u in templates))}, "__", version)


def test_a_kind_never_listed_is_never_news():
    lists = ShownLists()
    assert not lists.news("tools", _cat(1)) and not lists.news("tools", _cat(2, ("a", "b")))


def test_a_rebuild_that_leaves_the_list_as_shown_is_no_news():
    lists = ShownLists()
    lists.shown("tools", _cat(1))
    assert not lists.news("tools", _cat(7))  # another version, the same tools


def test_a_change_is_news_once_and_again_after_the_client_listed():
    lists = ShownLists()
    lists.shown("tools", _cat(1))
    assert lists.news("tools", _cat(2, ("a", "b")))
    assert not lists.news("tools", _cat(3, ("a", "b")))  # told already
    assert not lists.news("tools", _cat(4))  # back to what the client has
    lists.shown("tools", _cat(5, ("a", "b")))
    assert lists.news("tools", _cat(6))


def test_templates_belong_to_the_resources_notice():
    lists = ShownLists()
    lists.shown("resourceTemplates", _cat(1))
    assert lists.news("resources", _cat(2, templates=("r://{x}",)))
    only_resources = ShownLists()
    only_resources.shown("resources", _cat(1))  # it never fetched templates: nothing of them to refresh
    assert not only_resources.news("resources", _cat(2, templates=("r://{x}",)))


def test_resources_and_templates_listed_from_two_snapshots_are_each_compared():
    # resources listed at 1, templates at 2 (both changed at 2, its notice not yet sent): the
    # resources the client holds are stale, though its latest listing was of snapshot 2
    def cat(version, uris):
        return build({"s": ServerLists("s", "s", resources=tuple({"uri": u, "name": u} for u in uris),
                                       templates=tuple({"uriTemplate": u + "{x}", "name": u} for u in uris))},
                     "__", version)
    lists = ShownLists()
    lists.shown("resources", cat(1, ("r://a",)))
    lists.shown("resourceTemplates", cat(2, ("r://a", "r://b")))
    assert lists.news("resources", cat(2, ("r://a", "r://b")))
    assert not lists.news("resources", cat(2, ("r://a", "r://b")))  # told once
    assert kinds_of(["templates", "prompts", "tools", "other"]) == ["tools", "resources", "prompts"]
