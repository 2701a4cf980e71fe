"""Whose idle session makes room for a new one (actors/serve/quotas.py): never another client's
within its share; the client at its quota pays itself or is refused."""
from __future__ import annotations

from types import SimpleNamespace

from actors.catalogue.views import Profile
from actors.serve.quotas import CLIENT_FULL, FRONT_FULL, OPEN, Quotas, Room, make_room, refusal_text
from actors.settings.model import DEFAULT_CLIENT_SESSIONS, ClientEntry


def _idle(*keys):
    """oldest_idle for clients that each have an idle session named after them (others: none)."""
    return lambda key: f"idle-of-{key}" if key in keys else None


def test_room_under_the_quota_and_the_ceiling_costs_nobody():
    assert make_room("a", {"a": 3, "b": 5}, quota=10, ceiling=100, oldest_idle=_idle("a", "b")) is OPEN


def test_a_client_at_its_quota_gives_up_its_own_oldest_idle_session_never_another_clients():
    room = make_room("a", {"a": 5, "b": 1}, quota=5, ceiling=100, oldest_idle=_idle("a", "b"))
    assert room == Room("idle-of-a", "a")


def test_a_client_at_its_quota_with_every_session_busy_is_refused_though_others_are_idle():
    room = make_room("a", {"a": 5, "b": 90}, quota=5, ceiling=100, oldest_idle=_idle("b"))
    assert room.refused == CLIENT_FULL and room.evict is None


def test_at_the_ceiling_the_client_over_its_fair_share_gives_way_not_the_small_one():
    # ceiling 10, three holders (the asker counted): fair share 3; `big` holds 7.
    held = {"big": 7, "small": 2}
    assert make_room("new", held, quota=100, ceiling=9, oldest_idle=_idle("big", "small")) == Room("idle-of-big", "big")
    # The big one asking pays itself; the small one within its share keeps its idle session.
    assert make_room("big", held, quota=100, ceiling=9, oldest_idle=_idle("big", "small")) == Room("idle-of-big", "big")


def test_at_the_ceiling_a_client_never_takes_from_one_smaller_than_itself():
    held = {"a": 6, "b": 4}  # fair share 5: b is under it, a (asking) over it
    assert make_room("a", held, quota=100, ceiling=10, oldest_idle=_idle("b")).refused == FRONT_FULL
    held = {"a": 5, "b": 5}  # both at their fair share: the asker pays itself
    assert make_room("a", held, quota=100, ceiling=10, oldest_idle=_idle("a", "b")) == Room("idle-of-a", "a")


def test_at_the_ceiling_the_biggest_over_share_client_with_an_idle_session_goes_first():
    held = {"huge": 50, "big": 40, "me": 10}  # fair share 33; huge has nothing idle
    assert make_room("me", held, quota=100, ceiling=100, oldest_idle=_idle("big", "me")) == Room("idle-of-big", "big")


def test_at_the_ceiling_with_nothing_idle_that_may_go_the_front_refuses():
    assert make_room("a", {"a": 2, "b": 8}, quota=100, ceiling=10, oldest_idle=_idle()).refused == FRONT_FULL


def test_quotas_come_from_the_profile_the_unnamed_bucket_from_serve_profile_or_the_ceiling():
    profiles = {"small": Profile("small", max_sessions=3), "open": Profile("open")}

    def config(clients=(), profile=None):
        serve = SimpleNamespace(clients=clients, profile=profile, max_sessions=1000)
        return SimpleNamespace(serve=serve, profile=lambda name: profiles.get(name) if name else None)
    alice, ci = ClientEntry("alice", "t1", "small"), ClientEntry("ci", "t2")
    named = config(clients=(alice, ci))
    quotas = Quotas(lambda: named)  # pyright: ignore[reportArgumentType]  # a stand-in Config
    assert quotas.of(alice) == (3, "profiles.small.max_sessions")
    assert quotas.of(ci)[0] == DEFAULT_CLIENT_SESSIONS
    assert quotas.of(None)[0] == DEFAULT_CLIENT_SESSIONS  # the operator's token alone is unnamed
    assert Quotas(lambda: config()).of(None) == (1000, "serve.max_sessions")  # pyright: ignore[reportArgumentType]
    assert Quotas(lambda: config(profile="small")).of(None)[0] == 3  # pyright: ignore[reportArgumentType]
    text = refusal_text(alice, 3, 3, "profiles.small.max_sessions")
    assert "'alice'" in text and "quota" in text and "t1" not in text


def test_a_quota_as_big_as_the_ceiling_is_the_fronts_limit_not_the_clients():
    assert make_room(None, {None: 5}, quota=5, ceiling=5, oldest_idle=_idle()).refused == FRONT_FULL
    assert make_room(None, {None: 5}, quota=5, ceiling=5, oldest_idle=_idle(None)) == Room("idle-of-None", None)
