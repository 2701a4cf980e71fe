"""The HTTP session table in-process: evicted, expired and refused sessions, and their Session actors."""
from __future__ import annotations

import gevent
import pykka
import pytest

from actors.settings import config
from actors.runtime import Runtime
from actors.serve import quotas
from actors.serve.sessions import Refused, SessionTable
from tests.support import wait_until

CAP = 3


@pytest.fixture
def runtime():
    rt = Runtime(config.from_data({"servers": [], "discovery": {"enabled": False}})).start()
    yield rt
    rt.stop()
    pykka.ActorRegistry.stop_all()


@pytest.fixture
def table(runtime):
    sessions = SessionTable(runtime, idle_s=0.5, max_sessions=CAP)
    yield sessions
    sessions.close_all("test over")


def _open_idle(table: SessionTable, client=None):
    taken = table.open(legacy=False, rid=1, client=client)
    assert not isinstance(taken, Refused), taken
    hs, replies = taken
    assert replies is not None
    table.release(hs, replies)
    return hs


def test_the_least_recently_used_idle_session_makes_room_and_its_actor_stops(table):
    first, second, third = (_open_idle(table) for _ in range(CAP))
    hs, replies = table.acquire(first.id, 2)  # `first` is used again: `second` is now the oldest
    table.release(hs, replies)
    busy, _ = table.acquire(third.id, 3)  # busy: never evicted
    fourth = _open_idle(table)
    assert table.acquire(second.id, 4) is None
    wait_until(lambda: not second.ref.is_alive(), 5, message="the evicted session's actor to stop")
    assert all(hs.ref.is_alive() for hs in (first, third, fourth))
    assert table.summary()["open"] == CAP and table.summary()["evicted"] == 1


def test_when_every_session_is_busy_open_refuses(table):
    held = [table.open(legacy=False, rid=1) for _ in range(CAP)]
    assert isinstance(table.open(legacy=False, rid=1), Refused)
    assert isinstance(table.open(legacy=True), Refused)
    hs, replies = held[0]
    table.release(hs, replies)  # one turns idle: the next open takes its place
    assert table.open(legacy=False, rid=1) is not None
    assert table.acquire(hs.id, 2) is None
    assert table.summary()["refused"] == 2


def test_an_idle_session_expires_and_its_actor_stops_but_a_busy_one_stays(table):
    idle = _open_idle(table)
    busy, replies = table.open(legacy=False, rid=1)
    wait_until(lambda: table.summary()["open"] == 1, 5, message="the idle session to expire")
    wait_until(lambda: not idle.ref.is_alive(), 5, message="the expired session's actor to stop")
    assert table.acquire(idle.id, 2) is None
    assert table.touch(busy.id) is busy and busy.ref.is_alive()
    table.release(busy, replies)
    wait_until(lambda: table.summary()["open"] == 0, 5, message="the formerly busy session to expire")


def test_closing_a_session_answers_what_waits_on_it(table):
    hs, replies = table.open(legacy=False, rid=7)
    assert table.close(hs.id, "deleted by client")
    answer = replies.get(timeout=1)
    assert answer["id"] == 7 and "session closed: deleted by client" in answer["error"]["message"]
    assert table.acquire(hs.id, 8) is None


def test_a_burst_of_opens_never_passes_the_cap(table):
    made = []

    def initialize():
        taken = table.open(legacy=False, rid=1)
        if not isinstance(taken, Refused):
            made.append(taken[0])
            gevent.sleep(0)  # let the others run between open and release
            table.release(*taken)
    gevent.joinall([gevent.spawn(initialize) for _ in range(60)], timeout=20)
    assert table.summary()["open"] <= CAP
    wait_until(lambda: sum(hs.ref.is_alive() for hs in made) <= CAP, 10, message="evicted actors to stop")


def test_a_dead_session_actor_is_dropped_and_its_waiters_answered(table):
    hs, replies = table.open(legacy=False, rid=5)
    hs.ref.stop()
    assert hs.send({"jsonrpc": "2.0", "id": 5, "method": "ping"}, replies.put) is False
    table.gone(hs, "its session actor stopped")
    assert "session closed" in replies.get(timeout=1)["error"]["message"]
    assert table.summary()["open"] == 0


def test_a_client_at_its_quota_makes_room_among_its_own_sessions_or_is_refused(runtime):
    cfg = config.from_data({"servers": [], "discovery": {"enabled": False},
                            "profiles": {"two": {"max_sessions": 2}},
                            "serve": {"clients": [{"name": "a", "token": "token-of-a-1234", "profile": "two"},
                                                  {"name": "b", "token": "token-of-b-1234"}]}})
    a, b = cfg.serve.clients
    table = SessionTable(runtime, idle_s=60, max_sessions=10, quota=quotas.Quotas(lambda: cfg))
    try:
        theirs = _open_idle(table, b)
        first, second = _open_idle(table, a), _open_idle(table, a)
        third = _open_idle(table, a)  # at a's quota: a's own oldest idle session goes
        assert table.acquire(first.id, 2, client=a) is None
        assert all(table.touch(hs.id, client=c) is hs for hs, c in ((second, a), (third, a), (theirs, b)))
        held = [table.acquire(hs.id, 3, client=a) for hs in (second, third)]  # both busy now
        refused = table.open(legacy=False, rid=4, client=a)
        assert isinstance(refused, Refused) and refused.scope == quotas.CLIENT_FULL, refused
        assert "'a'" in refused.text and "profiles.two.max_sessions" in refused.text
        assert table.touch(theirs.id, client=b) is theirs  # b was never asked to make room
        assert table.by_client() == {"a": 2, "b": 1}
        assert table.quota_figures() == {"a": {"evicted": 1, "refused": 1}}
        for taken in held:
            assert taken is not None
            table.release(*taken)
        assert not isinstance(table.open(legacy=False, rid=5, client=a), Refused)
    finally:
        table.close_all("test over")
