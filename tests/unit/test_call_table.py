"""The one table of the calls a session owes answers to, alone: each call has its own deadline
and token, so an answer, a deadline or a cancellation settles the current call at most once,
a reused client id never takes the answer meant for an earlier call, a parked call (its client
answered input_required) is found by token alone until a retry takes it up, and withdrawing a
call stops the work doing it."""
import gevent
import gevent.event

from actors.downstream.calls import FORWARDED, LOCAL, CallTable


def _calls(on_deadline=None):
    return CallTable(on_deadline or (lambda token: None))


def _open(calls, rid, server="echo", ref=None, deadline=60.0, sink=None):
    call = calls.open(rid, sink, None, FORWARDED, deadline)
    call.server, call.method, call.ref = server, "tools/call", ref if ref is not None else object()
    return call.token


def test_a_call_settles_once_and_only_under_its_own_token():
    calls = _calls()
    ref, sink = object(), []
    token = _open(calls, 7, ref=ref, sink=sink.append)
    assert calls.get(7).server == "echo" and len(calls) == 1
    assert calls.settle(token + 1) is None  # no such call
    call = calls.settle(token)
    assert call is not None and call.ref is ref and call.sink == sink.append and call.rid == 7
    assert calls.settle(token) is None and len(calls) == 0 and calls.get(7) is None
    assert calls.get(True) is None  # true is not request 1


def test_a_reused_id_names_the_new_call_and_the_earlier_one_is_still_owed():
    calls = _calls()
    first = _open(calls, "a")
    second = _open(calls, "a")
    assert first != second
    assert calls.get("a").token == second
    assert calls.current(first) is not None and calls.current(second) is not None
    calls.settle(first)  # the earlier call's answer does not unlink the id from the later one
    assert calls.get("a").token == second


def test_the_deadline_tells_the_token_and_is_dropped_when_settled():
    fired, due = gevent.event.Event(), []

    def on_deadline(token):
        due.append(token)
        fired.set()
    calls = _calls(on_deadline)
    settled = _open(calls, 2, "fast", deadline=0.01)
    calls.settle(settled)
    # a later deadline: once it fires, the dropped one would have fired first
    late = _open(calls, 1, "slow", deadline=0.05)
    assert fired.wait(timeout=5)
    assert due == [late]
    assert calls.current(late) is not None  # the Session's own handler settles it, not the timer


def test_a_parked_call_has_no_id_and_no_deadline_until_a_retry_attaches():
    fired = gevent.event.Event()
    calls = _calls(lambda token: fired.set())
    token = _open(calls, 5, deadline=0.05)
    call = calls.current(token)
    calls.park(call)
    assert call.parked and calls.get(5) is None and calls.parked_count() == 1
    assert not fired.wait(timeout=0.2)  # parked: its deadline was dropped
    calls.attach(call, 9, print, None, deadline=0.01)
    assert calls.get(9) is call and not call.parked and calls.parked_count() == 0
    assert fired.wait(timeout=5)  # attached: a deadline again


def test_withdraw_and_close_leave_nothing_owed():
    calls = _calls()
    conn_a, conn_b = object(), object()
    _open(calls, 1, "a", conn_a)
    _open(calls, 2, "a", conn_a)
    _open(calls, 3, "b", conn_b)
    assert calls.withdraw(3, "cancelled").ref is conn_b
    assert calls.withdraw(3, "cancelled") is None and calls.withdraw(None, "cancelled") is None
    assert {c.ref for c in calls.close("gone")} == {conn_a}
    assert len(calls) == 0 and calls.close("gone") == []


class _Stopped(Exception):
    pass


def test_withdrawing_a_call_stops_its_work_with_the_reason_and_answering_does_not():
    calls = _calls()
    stopped: list = []

    def work(token):
        try:
            gevent.sleep(30)
        except _Stopped as exc:
            stopped.append(str(exc))
    cancelled = calls.open(1, print, None, LOCAL, 60.0)
    cancelled.work, cancelled.stop_with = gevent.spawn(work, cancelled.token), _Stopped
    answered = calls.open(2, print, None, LOCAL, 60.0)
    answered.work = gevent.spawn(gevent.sleep, 0.2)
    gevent.sleep(0)  # both greenlets running
    assert calls.withdraw(1, "cancelled by client") is cancelled
    assert calls.settle(answered.token) is answered
    assert answered.work is not None and not answered.work.dead  # its own work answered: left to end
    for _ in range(100):
        if stopped:
            break
        gevent.sleep(0.01)
    assert stopped == ["cancelled by client"] and len(calls) == 0
