"""The table of forwarded requests a session awaits, alone: each call has its own deadline
and token, so an answer, a deadline or a cancellation settles the current call at most once,
a reused client id never takes the answer meant for an earlier call, and a parked call (its
client answered input_required) is found by token alone until a retry takes it up."""
import gevent.event

from actors.downstream.forwarding import ForwardedCalls


def _calls(on_deadline=None):
    return ForwardedCalls(on_deadline or (lambda token: None))


def _open(calls, rid, server="echo", ref=None, deadline=60.0, sink=None):
    return calls.open(rid, server, "tools/call", {}, sink, None, ref if ref is not None else object(), None,
                      deadline=deadline)


def test_a_call_settles_once_and_only_under_its_own_token():
    calls = _calls()
    ref, sink = object(), []
    token = _open(calls, 7, ref=ref, sink=sink.append)
    assert calls.get(7).server == "echo" and len(calls) == 1
    assert calls.settle(token + 1) is None  # no such call
    call = calls.settle(token)
    assert call is not None and call.ref is ref and call.sink == sink.append and call.rid == 7
    assert calls.settle(token) is None and len(calls) == 0 and calls.get(7) is None


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
    assert calls.withdraw(3).ref is conn_b
    assert calls.withdraw(3) is None and calls.withdraw(None) is None
    assert calls.close() == {conn_a}  # each connection told once, not once per call
    assert len(calls) == 0 and calls.close() == set()
