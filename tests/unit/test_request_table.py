"""The Connection's RequestTable on its own: ids, one answer per request, deadlines that only
notify the owner, cancellation, fail-all and late replies. Also the shared handshake checks."""
from __future__ import annotations

import time

import gevent
import pytest

from actors.messages import NOT_A_CALLER, UpstreamError
from actors.protocol import handshake, jsonrpc, mcp
from actors.upstream.requests import RequestTable, outcome_of, usable_id
from actors.upstream.stats import ServerStats

LOST = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "gone", link_lost=True)
TIMED_OUT = UpstreamError(jsonrpc.REQUEST_TIMEOUT, "too slow")


class Answers:
    """Collects every answer each request got, to check there is exactly one."""

    def __init__(self) -> None:
        self.got: dict[str, list] = {}

    def for_(self, name: str):
        self.got.setdefault(name, [])
        return self.got[name].append


def _table(deadlines: list | None = None) -> tuple[RequestTable, ServerStats]:
    stats = ServerStats()
    sink = deadlines if deadlines is not None else []
    return RequestTable(stats, sink.append), stats


def _wait_for(condition, bound: float = 5.0) -> None:
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        gevent.sleep(0.01)


def test_ids_are_unique_and_entries_pending_until_answered():
    table, _ = _table()
    answers = Answers()
    ids = [table.open("tools/call", answers.for_(str(n)), timeout=60) for n in range(50)]
    assert len(set(ids)) == 50
    assert len(table) == 50 and all(rid in table for rid in ids)
    table.fail_all(LOST)  # no timer left behind


def test_complete_answers_once_and_later_replies_are_dropped_and_counted():
    table, stats = _table()
    answers = Answers()
    rid = table.open("tools/call", answers.for_("a"), timeout=60, counted=True)
    assert stats.in_flight == 1
    entry = table.complete(rid, {"content": []})
    assert entry is not None and entry.method == "tools/call"
    assert table.complete(rid, {"content": ["again"]}) is None
    assert answers.got["a"] == [{"content": []}]
    assert rid not in table and stats.in_flight == 0
    assert stats.snapshot().calls == 1 and stats.snapshot().errors == 0
    assert table.late == 1


@pytest.mark.parametrize("bad", [[1], {"id": 1}, True])
def test_unusable_ids_answer_nothing_and_raise_nothing(bad):
    table, _ = _table()
    answers = Answers()
    table.open("ping", answers.for_("a"), timeout=60)  # id 1, which true must not pass for
    assert not usable_id(bad)
    assert table.complete(bad, {}) is None
    assert table.get(bad) is None and bad not in table
    assert answers.got["a"] == [] and len(table) == 1 and table.late == 0
    table.fail_all(LOST)


def test_the_deadline_only_notifies_the_owner_and_time_out_answers_exactly_once():
    deadlines: list = []
    table, stats = _table(deadlines)
    answers = Answers()
    rid = table.open("tools/call", answers.for_("a"), timeout=0.05, counted=True)
    _wait_for(lambda: deadlines)
    # the timer's greenlet told the owner and touched nothing: the entry is still pending
    assert deadlines == [rid] and rid in table and answers.got["a"] == []
    assert table.time_out(rid, TIMED_OUT) is not None
    assert table.time_out(rid, TIMED_OUT) is None  # a second notice finds nothing
    assert answers.got["a"] == [TIMED_OUT]
    assert stats.timeouts == 1 and stats.in_flight == 0
    assert table.complete(rid, {"late": True}) is None  # the reply after the timeout
    assert answers.got["a"] == [TIMED_OUT] and table.late == 1


def test_an_answer_stops_the_deadline_timer():
    deadlines: list = []
    table, _ = _table(deadlines)
    rid = table.open("ping", lambda _: None, timeout=0.05)
    entry = table.complete(rid, {})
    assert entry is not None and entry.timer is not None
    _wait_for(lambda: entry.timer.dead)
    assert deadlines == []


def test_fail_all_answers_every_pending_request_exactly_once():
    table, stats = _table()
    answers = Answers()
    for n in range(5):
        table.open("tools/call", answers.for_(str(n)), timeout=60, counted=n % 2 == 0)
    done = table.open("ping", answers.for_("done"), timeout=60)
    table.complete(done, {})
    assert table.fail_all(LOST) == 5
    assert table.fail_all(LOST) == 0
    assert all(answers.got[str(n)] == [LOST] for n in range(5))
    assert answers.got["done"] == [{}]
    assert len(table) == 0 and stats.in_flight == 0
    assert stats.snapshot().calls == 3 and stats.snapshot().errors == 3


def test_a_failing_reply_handler_does_not_keep_the_others_from_their_answer():
    table, _ = _table()
    answers = Answers()

    def broken(_outcome) -> None:
        raise RuntimeError("handler bug")
    table.open("tools/call", broken, timeout=60)
    table.open("tools/call", answers.for_("b"), timeout=60)
    table.fail_all(LOST)
    assert answers.got["b"] == [LOST]


def test_cancel_withdraws_the_matching_calls_unanswered():
    table, stats = _table()
    answers = Answers()
    a1 = table.open("tools/call", answers.for_("a1"), timeout=60, counted=True, origin="A", origin_request=1)
    a2 = table.open("tools/call", answers.for_("a2"), timeout=60, counted=True, origin="A", origin_request=2)
    table.open("tools/call", answers.for_("b1"), timeout=60, counted=True, origin="B", origin_request=1)
    assert table.cancel_matching("A", 1) == [a1]
    assert a1 not in table and a2 in table and stats.in_flight == 2
    assert table.cancel_matching("A", None) == [a2]  # the whole session
    assert answers.got["a1"] == [] and answers.got["a2"] == []
    assert table.complete(a1, {}) is None and table.late == 1
    table.fail_all(LOST)
    assert answers.got["b1"] == [LOST]


class _Caller:
    """A stand-in for a Session's ref: something a server's request can be routed to."""

    def __init__(self, urn: str) -> None:
        self.actor_urn = urn

    def tell(self, message) -> None:
        pass


def test_a_servers_request_belongs_to_the_one_client_with_calls_in_flight_or_to_nobody():
    table, _ = _table()
    a, b = _Caller("a"), _Caller("b")
    assert "not sent while" in table.asker()  # nothing in flight: unsolicited
    table.open("tools/list", lambda o: None, timeout=60)  # troupe's own request is nobody's call
    assert "not sent while" in table.asker()
    table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=a, origin_request=1)
    table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=(a, "listen", 4))
    newest = table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=a, origin_request=2)
    assert table.asker() == (a, 2)  # one client: its newest call
    b_call = table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=b, origin_request=1)
    refused = table.asker()
    assert isinstance(refused, str) and "cannot tell whose call asked" in refused and "per_client" in refused
    assert table.asker(related=newest) == (a, 2)  # the stream it came on says whose it is
    assert table.asker(related=b_call) == (b, 1)
    assert isinstance(table.asker(related=9999), str)  # a stream of a call that is over: nobody
    table.cancel_matching(b, None)
    assert table.asker() == (a, 2)


def test_the_task_keepers_calls_are_each_their_own_caller_and_its_polls_nobodys():
    table, _ = _table()
    keeper = _Caller("keeper")
    table.open("tasks/get", lambda o: None, timeout=60, counted=True, origin=keeper, origin_request="op1",
               caller=NOT_A_CALLER)
    assert "not sent while" in table.asker()  # a poll carries no client's question
    table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=keeper, origin_request="t1",
               caller=("task", "t1"))
    assert table.asker() == (keeper, "t1")
    # a second client's task: one origin (the keeper), two callers: nobody is asked
    t2 = table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=keeper, origin_request="t2",
                    caller=("task", "t2"))
    refused = table.asker()
    assert isinstance(refused, str) and "cannot tell whose call asked" in refused
    assert table.asker(related=t2) == (keeper, "t2")


def test_a_question_naming_its_task_goes_to_the_request_following_that_task():
    table, _ = _table()
    keeper, session = _Caller("keeper"), _Caller("session")
    table.open("tasks/result", lambda o: None, timeout=60, counted=True, origin=keeper, origin_request="t1",
               caller=("follows", "up-1"))
    table.open("tasks/result", lambda o: None, timeout=60, counted=True, origin=keeper, origin_request="t2",
               caller=("follows", "up-2"))
    table.open("tools/call", lambda o: None, timeout=60, counted=True, origin=session, origin_request=3)
    assert table.asker(task="up-2") == (keeper, "t2") and table.asker(task="up-1") == (keeper, "t1")
    assert isinstance(table.asker(task="up-9"), str)  # no such follow: the usual rule, three callers


def test_outcome_of_turns_a_response_into_a_result_or_an_error():
    assert outcome_of({"id": 1, "result": {"x": 1}}, "s") == {"x": 1}
    assert outcome_of({"id": 1, "result": [1]}, "s") == {}
    error = outcome_of({"id": 1, "error": {"code": -32601, "message": "nope"}}, "s")
    assert isinstance(error, UpstreamError) and (error.code, error.message, error.server) == (-32601, "nope", "s")
    odd = outcome_of({"id": 1, "error": "text"}, "s")
    assert isinstance(odd, UpstreamError) and odd.code == jsonrpc.INTERNAL_ERROR and odd.message == "text"


def test_the_handshake_asks_for_the_newest_version_and_accepts_only_supported_ones():
    method, params = handshake.opening({"sampling": {}})
    assert method == "initialize"
    assert params == {"protocolVersion": mcp.LATEST, "capabilities": {"sampling": {}}, "clientInfo": mcp.CLIENT_INFO}
    assert handshake.opening(None, {"name": "probe", "version": "1"})[1]["capabilities"] == {}
    opened = handshake.accept({"protocolVersion": mcp.SUPPORTED_VERSIONS[-1], "capabilities": {"tools": {}},
                               "serverInfo": {"name": "x"}})
    assert (opened.version, opened.capabilities, opened.server_info) == \
        (mcp.SUPPORTED_VERSIONS[-1], {"tools": {}}, {"name": "x"})
    assert handshake.confirmation(opened) == jsonrpc.notification("notifications/initialized")
    with pytest.raises(handshake.HandshakeError, match="1999-01-01"):
        handshake.accept({"protocolVersion": "1999-01-01"})
    with pytest.raises(handshake.HandshakeError, match="no result"):
        handshake.accept(None)
