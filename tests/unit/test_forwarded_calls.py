"""The table of forwarded requests a session awaits, alone: each call has its own deadline
and token, so an answer, a deadline or a cancellation settles the current call at most once,
and a reused client id never takes the answer meant for an earlier call."""
import gevent.event

from actors.downstream.forwarding import ForwardedCalls


def _calls(on_deadline=None):
    return ForwardedCalls(on_deadline or (lambda rid, token: None))


def test_a_call_settles_once_and_only_under_its_own_token():
    calls = _calls()
    ref, sink = object(), []
    token = calls.open(7, "echo", sink.append, None, ref, None, deadline=60)
    assert calls.get(7).server == "echo" and len(calls) == 1
    assert calls.settle(7, token + 1) is None  # an answer meant for an earlier call with this id
    call = calls.settle(7, token)
    assert call is not None and call.ref is ref and call.sink == sink.append
    assert calls.settle(7, token) is None and len(calls) == 0


def test_a_reused_id_replaces_the_earlier_call():
    calls = _calls()
    first = calls.open("a", "echo", None, None, object(), None, deadline=60)
    second = calls.open("a", "echo", None, None, object(), None, deadline=60)
    assert first != second
    assert calls.current("a", first) is None and calls.current("a", second) is not None


def test_the_deadline_tells_rid_and_token_and_is_dropped_when_settled():
    fired, due = gevent.event.Event(), []

    def on_deadline(rid, token):
        due.append((rid, token))
        fired.set()
    calls = _calls(on_deadline)
    settled = calls.open(2, "fast", None, None, object(), None, deadline=0.01)
    calls.settle(2, settled)
    # a later deadline: once it fires, the dropped one would have fired first
    late = calls.open(1, "slow", None, None, object(), None, deadline=0.05)
    assert fired.wait(timeout=5)
    assert due == [(1, late)]
    assert calls.current(1, late) is not None  # the Session's own handler settles it, not the timer


def test_withdraw_and_close_leave_nothing_owed():
    calls = _calls()
    conn_a, conn_b = object(), object()
    calls.open(1, "a", None, None, conn_a, None, deadline=60)
    calls.open(2, "a", None, None, conn_a, None, deadline=60)
    calls.open(3, "b", None, None, conn_b, None, deadline=60)
    assert calls.withdraw(3).ref is conn_b
    assert calls.withdraw(3) is None and calls.withdraw(None) is None
    assert calls.close() == {conn_a}  # each connection told once, not once per call
    assert len(calls) == 0 and calls.close() == set()
