"""FailoverFront against scripted stand-in Connections: held calls go on when a target is named,
a call that never ran is sent again, a lost safe call once, a lost unsafe one gets the clear
error; budgets, cancels and a server that is down answer every call exactly once."""
from __future__ import annotations

import pykka
import pytest

from actors.cluster.failover import PROBE_S, FailoverFront, FrontTarget
from actors.messages import CancelForward, Forward, UpstreamError
from actors.protocol import jsonrpc
from tests.support import wait_until

OK = {"content": [{"type": "text", "text": "ok"}]}
UNSENT = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "counter: POST failed: ConnectionError (Connection refused)",
                       server="counter", link="unsent")
LOST = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "counter: POST failed: ConnectionError (Connection aborted)",
                     server="counter", link="lost")
REFUSED_BY_RELAY = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "instance b does not run counter now",
                                 {"notRun": True, "httpStatus": 503}, server="counter")


class Standin(pykka.ThreadingActor):
    """Answers each Forward with the next scripted outcome (the last one repeats; none: it never
    answers); keeps what it got."""

    def __init__(self, script) -> None:
        super().__init__()
        self.script, self.got, self.cancels = list(script), [], []

    def on_receive(self, message):
        if isinstance(message, Forward):
            self.got.append(message)
            if self.script:
                message.on_reply(self.script.pop(0) if len(self.script) > 1 else self.script[0])
        elif isinstance(message, CancelForward):
            self.cancels.append(message)


@pytest.fixture
def front():
    ref = FailoverFront.start("counter")
    yield ref
    pykka.ActorRegistry.stop_all()


def _standin(*script):
    ref = Standin.start(script)
    return ref, ref.proxy()


def _call(answers: list, *, idempotent=False, timeout=None, origin="s1", token=1) -> Forward:
    return Forward("tools/call", {"name": "next"}, answers.append, timeout=timeout, origin=origin,
                   origin_request=token, idempotent=idempotent)


def test_a_call_held_while_the_lease_moves_goes_to_the_new_owner_within_its_budget(front):
    answers: list = []
    front.tell(FrontTarget(None, True, "server counter is starting: waiting for its lease", relay=True))
    front.tell(_call(answers, timeout=5.0))
    ref, standin = _standin(OK)
    front.tell(FrontTarget(ref, False, "", relay=True, owner="b"))
    wait_until(lambda: answers, 5, message="the held call answered")
    assert answers == [OK]
    got = standin.got.get()
    assert len(got) == 1 and 0 < got[0].timeout < 5.0  # the wait counted against its own timeout


@pytest.mark.parametrize("never_ran", [UNSENT, REFUSED_BY_RELAY], ids=["connection-refused", "relay-503"])
def test_a_call_that_never_reached_the_owner_is_sent_again_even_if_not_idempotent(front, never_ran):
    answers: list = []
    ref, standin = _standin(never_ran, OK)
    front.tell(FrontTarget(ref, False, "", relay=True, owner="a"))
    front.tell(_call(answers))
    wait_until(lambda: answers, 5 + PROBE_S, message="answered after a probe")
    assert answers == [OK] and len(standin.got.get()) == 2


def test_a_lost_idempotent_call_is_sent_again_once_to_the_new_owner(front):
    answers: list = []
    old, old_standin = _standin(LOST, UNSENT)  # the in-flight call breaks, then the dead owner refuses
    front.tell(FrontTarget(old, False, "", relay=True, owner="a"))
    front.tell(_call(answers, idempotent=True))
    wait_until(lambda: len(old_standin.got.get()) >= 2, 5, message="a probe of the dead owner")
    assert answers == []
    new, new_standin = _standin(OK)
    front.tell(FrontTarget(new, False, "", relay=True, owner="b"))
    wait_until(lambda: answers, 5, message="answered by the new owner")
    assert answers == [OK] and len(new_standin.got.get()) == 1


def test_a_lost_call_that_is_not_idempotent_gets_the_clear_error_and_is_not_sent_again(front):
    answers: list = []
    ref, standin = _standin(LOST)
    front.tell(FrontTarget(ref, False, "", relay=True, owner="a"))
    front.tell(_call(answers))
    wait_until(lambda: answers, 5, message="answered")
    [error] = answers
    assert isinstance(error, UpstreamError) and "may have run there" in error.message and "instance a" in error.message
    assert not error.link_lost and not error.link  # settled here: the Session must not retry it either
    assert len(standin.got.get()) == 1


def test_a_held_call_whose_budget_runs_out_gets_a_timeout(front):
    answers: list = []
    front.tell(FrontTarget(None, True, "server counter is starting: waiting for its lease"))
    front.tell(_call(answers, timeout=0.2))
    wait_until(lambda: answers, 5, message="the timeout")
    assert answers[0].code == jsonrpc.REQUEST_TIMEOUT and "waiting for its lease" in answers[0].message


def test_a_cancelled_held_call_is_never_sent_nor_answered(front):
    cancelled: list = []
    later: list = []
    front.tell(FrontTarget(None, True, "moving"))
    front.tell(_call(cancelled, origin="s1", token=7))
    front.tell(CancelForward("s1", 7))
    ref, standin = _standin(OK)
    front.tell(FrontTarget(ref, False, "", relay=True))
    front.tell(_call(later, origin="s2", token=1))
    wait_until(lambda: later, 5, message="the next call answered")
    assert cancelled == [] and [f.origin for f in standin.got.get()] == ["s2"]


def test_a_sent_call_cancelled_is_cancelled_where_it_went(front):
    answers: list = []
    ref, standin = _standin()
    front.tell(FrontTarget(ref, False, "", relay=True))
    front.tell(_call(answers, origin="s1", token=3))
    front.tell(CancelForward("s1", 3, "cancelled by client"))
    wait_until(lambda: standin.cancels.get(), 5, message="the cancel passed on")
    assert answers == [] and standin.cancels.get()[0].origin_request == 3


def test_held_calls_are_answered_at_once_when_the_server_is_down(front):
    answers: list = []
    front.tell(FrontTarget(None, True, "moving"))
    front.tell(_call(answers))
    front.tell(FrontTarget(None, False, "server counter has failed: circuit open"))
    wait_until(lambda: answers, 5, message="answered")
    assert "circuit open" in answers[0].message
    front.tell(_call(answers))
    wait_until(lambda: len(answers) == 2, 5, message="a new call answered at once")


def test_a_local_connections_failure_reaches_the_session_unchanged(front):
    answers: list = []
    crashed = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "server counter failed: exited", server="counter",
                            link_lost=True)
    ref, _ = _standin(crashed)
    front.tell(FrontTarget(ref, False, "", relay=False))
    front.tell(_call(answers, idempotent=True))
    wait_until(lambda: answers, 5, message="answered")
    assert answers == [crashed]  # the Session retries it when the server is back, as without a cluster


def test_a_call_its_connection_never_answers_is_answered_after_its_timeout(front):
    answers: list = []
    ref, _ = _standin()  # takes the call and drops it, as a Connection stopped with it in its mailbox
    front.tell(FrontTarget(ref, False, "", relay=True))
    front.tell(_call(answers, timeout=0.1))
    wait_until(lambda: answers, 5, message="answered by the front")
    assert answers[0].code == jsonrpc.REQUEST_TIMEOUT and "gave no answer" in answers[0].message


def test_a_refusal_from_the_old_owner_goes_straight_to_the_new_one(front):
    answers: list = []
    old, _ = _standin()  # holds the call, answers only when told below
    front.tell(FrontTarget(old, False, "", relay=True, owner="a"))
    front.tell(_call(answers))
    new, new_standin = _standin(OK)
    front.tell(FrontTarget(new, False, "", relay=True, owner="b"))
    wait_until(lambda: old.proxy().got.get(), 5, message="the call at the old owner")
    old.proxy().got.get()[0].on_reply(UNSENT)  # the old owner's refusal arrives after the move
    wait_until(lambda: answers, 5, message="answered by the new owner")
    assert answers == [OK] and len(new_standin.got.get()) == 1


def test_a_call_told_to_a_stopping_front_is_answered_not_dropped(front):
    from actors.tells import tell
    answers: list = []
    front.stop(block=False)  # queued: the front has not run since, so it takes the next tell
    assert tell(front, _call(answers))
    wait_until(lambda: answers, 5, message="the call told after the stop answered")
    assert len(answers) == 1 and "was removed" in answers[0].message
