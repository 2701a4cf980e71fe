"""A session's resource subscriptions, alone: recorded only once upstream accepted them,
notifications named by the URI the client used, and every one unsubscribed exactly once
whether the client unsubscribes or goes away."""
from actors.downstream.client_subscriptions import ClientSubscriptions


def _subs():
    told: list[tuple[str, str]] = []
    return ClientSubscriptions(lambda server, uri: told.append((server, uri))), told


def test_a_confirmed_subscription_names_updates_by_the_clients_uri():
    subs, told = _subs()
    assert not subs.follows("docs", "file:///a")
    subs.confirmed("docs", "file:///a", "docs+file:///a")
    assert subs.follows("docs", "file:///a") and len(subs) == 1
    assert subs.exposed_uri("docs", "file:///a") == "docs+file:///a"
    assert subs.exposed_uri("docs", "file:///b") is None
    assert subs.exposed_uri("other", "file:///a") is None  # same URI on another server is not followed
    assert told == []  # subscribing is forwarded by the session, not by this table


def test_unsubscribe_tells_upstream_once_and_only_for_what_was_followed():
    subs, told = _subs()
    subs.confirmed("docs", "file:///a", "file:///a")
    assert subs.drop("docs", "file:///b") is False  # never followed: upstream is not bothered
    assert told == []
    assert subs.drop("docs", "file:///a") is True
    assert subs.drop("docs", "file:///a") is False  # a second unsubscribe is a no-op
    assert told == [("docs", "file:///a")]
    assert not subs.follows("docs", "file:///a") and len(subs) == 0


def test_closing_unsubscribes_everything_followed_exactly_once():
    subs, told = _subs()
    subs.confirmed("docs", "file:///a", "file:///a")
    subs.confirmed("docs", "file:///b", "file:///b")
    subs.confirmed("web", "https://x", "web+https://x")
    subs.drop("docs", "file:///b")
    subs.close()
    assert sorted(told) == [("docs", "file:///a"), ("docs", "file:///b"), ("web", "https://x")]
    assert len(subs) == 0
    subs.close()  # a crash after a stop (on_failure calls on_stop) must not unsubscribe twice
    assert len(told) == 3


def test_subscribing_again_to_a_followed_resource_keeps_one_entry():
    subs, told = _subs()
    subs.confirmed("docs", "file:///a", "file:///a")
    subs.confirmed("docs", "file:///a", "file:///a")
    subs.close()
    assert told == [("docs", "file:///a")]
