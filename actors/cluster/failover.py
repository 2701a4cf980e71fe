"""FailoverFront: the actor every call to a `single` server goes through on an instance of a
cluster, so that a call reaching it while the server's lease moves waits for the new owner.

The Supervisor tells it where calls go now (FrontTarget): the server's ready Connection (here,
or a relay to the owner), or nobody yet while the lease moves (calls are held), or nobody at
all (calls are answered at once with why). It passes each Forward on with its own reply
callback, so it sees every answer first:

- a call the relay refused to connect for (`link == "unsent"`), or that the owner's relay
  endpoint refused with 503 and NOT_RUN (it does not run the server now), never ran: it is held
  and sent again, to whoever serves next;
- a call whose link broke with it out (`link == "lost"`, or the relay Connection died under it)
  may have run: a safe one (Forward.idempotent, as the Session judges it) is held and sent again
  once; any other is answered with an error saying it may have run and was not sent twice.

After a link failure the target is suspect: new calls are held too, and every PROBE_S the held
ones are tried on it again (the owner may be back) until the Supervisor names a new target.
Each call keeps its own budget (its Forward's timeout, else the server's): the time it waited
here counts against it, and a call still held when it runs out is answered with a timeout,
before the Session's own deadline (which stays the net). A failure of a local Connection (this
instance is the owner) is passed on unchanged: the Session retries it as it does without a
cluster. Only this actor's greenlet touches its tables; its timers and reply callbacks tell it.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace
from typing import Any

import pykka
from loguru import logger

from actors.deadline import Deadline
from actors.messages import CancelForward, Forward, UpstreamError
from actors.protocol import jsonrpc
from actors.upstream.requests import matches
from actors.tells import tell, unread_tells

PROBE_S = 0.2  # how often calls held on a suspect target are tried on it again
# A sent call whose Connection has not answered this long after its timeout (the Connection was
# stopped with the call still in its mailbox) is answered here: before the Session's deadline.
SENT_MARGIN_S = 1.0
# The error data of an owner's relay endpoint refusing a call with 503 before running any of it
# (it does not own the server now, has not joined, or its Connection went away): sent elsewhere.
NOT_RUN = {"notRun": True}
RELAY_REFUSED = 503


@dataclass(frozen=True, slots=True)
class FrontTarget:
    """Told by the Supervisor to a server's FailoverFront whenever where its calls go changes:
    `ref` the ready Connection (None: nobody now); `hold` True while the lease moves (calls wait),
    False to answer calls at once with `reason`; `relay` True when ref relays to the owner
    `owner`; `timeout` the server's per-request timeout (a call's budget unless it has its own)."""

    ref: pykka.ActorRef | None
    hold: bool
    reason: str
    relay: bool = False
    owner: str | None = None
    timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class _Answered:
    """Told by a passed-on call's reply callback (in the Connection's greenlet): its outcome."""

    key: int
    outcome: Any


@dataclass(frozen=True, slots=True)
class _Overdue:
    """Told by a call's timer: its budget ran out while it was held (or its Connection's own
    timeout passed without an answer)."""

    key: int


@dataclass(frozen=True, slots=True)
class _Probe:
    """Told by the probe timer: try the held calls on the suspect target again."""


class _Call:
    """One Forward this front owes exactly one answer to: where it was last sent (`went`), whether
    it may be sent again after a lost link (`resent` once it was), its budget and its timer."""

    __slots__ = ("fwd", "started", "budget", "went", "resent", "timer")

    def __init__(self, fwd: Forward, budget: float) -> None:
        self.fwd, self.started, self.budget = fwd, time.monotonic(), budget
        self.went: FrontTarget | None = None  # where it was last sent
        self.resent = False
        self.timer: Deadline | None = None

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)


def _failure(outcome, relay: bool) -> str:
    """"unsent", "lost", or "" (an answer to pass on) for an outcome from a target. Only a relay's
    failures are the front's: a local Connection's reach the Session as they are."""
    if not relay or not isinstance(outcome, UpstreamError):
        return ""
    if outcome.link:
        return outcome.link
    if outcome.link_lost:
        return "lost"  # the relay Connection died or stopped with the call out
    data = outcome.data
    if isinstance(data, dict) and data.get("httpStatus") == RELAY_REFUSED and data.get("notRun") is True:
        return "unsent"
    return ""


class FailoverFront(pykka.ThreadingActor):
    """Owns the calls to one `single` server through this instance: those passed on to its
    Connection and not yet answered (`sent`), those waiting for a target (`held`, oldest first),
    and what the Supervisor last said of its target. Receives Forward and CancelForward (from
    Sessions and the relay endpoint), FrontTarget (from the Supervisor), and from its own timers
    and callbacks _Answered, _Overdue and _Probe. Sends Forward and CancelForward to the
    target Connection; answers each call through its Forward's on_reply, exactly once."""

    def __init__(self, server: str) -> None:
        super().__init__()
        self.server = server
        self.log = logger.bind(server=server)
        self.where = FrontTarget(None, True, f"server {server} is starting")
        self.suspect = False  # the target failed a call for link reasons: hold and probe
        self.sent: dict[int, _Call] = {}
        self.held: dict[int, _Call] = {}
        self._keys = itertools.count(1)
        self._probe: Deadline | None = None

    def on_stop(self) -> None:
        self._kill_probe()
        removed = UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {self.server} was removed", server=self.server)
        self._answer_held(removed)
        for message in unread_tells(self):  # told after the stop: pykka would drop them unanswered
            if isinstance(message, Forward):
                self._answer(_Call(message, 0.0), removed)

    def on_failure(self, exc_type, exc_value, traceback) -> None:
        self.on_stop()  # a bug here: every held call still gets its answer

    def on_receive(self, message):
        match message:
            case Forward():
                call = _Call(message, message.timeout or self.where.timeout)
                self._route(next(self._keys), call)
            case _Answered(key=key, outcome=outcome):
                self._answered(key, outcome)
            case CancelForward():
                self._cancel(message)
            case FrontTarget():
                self._retarget(message)
            case _Overdue(key=key):
                self._overdue(key)
            case _Probe():
                self._probe = None
                if self.suspect and self.where.ref is not None:
                    self._release(probe=True)
            case _:
                self.log.warning("failover front: unknown message {!r}", message)

    # ---------------------------------------------------------------- routing

    def _route(self, key: int, call: _Call) -> None:
        """Send a call on, hold it, or answer it, as the target stands now."""
        if self.where.ref is not None and not self.suspect:
            self._send(key, call)
        elif self.where.ref is not None or self.where.hold:
            self._hold(key, call)
        else:
            self._answer(call, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, self.where.reason, server=self.server))

    def _send(self, key: int, call: _Call) -> None:
        left = call.left()
        if left <= 0:
            self._answer(call, UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"server {self.server}: no instance could "
                                             f"serve it within {call.budget:g}s", server=self.server))
            return
        me, original = self.actor_ref, call.fwd.on_reply

        def on_reply(outcome) -> None:  # the Connection's greenlet: a tell, or the answer itself if we are gone
            if not tell(me, _Answered(key, outcome)):
                original(outcome)
        target = self.where.ref
        assert target is not None  # _route and _release send only with a target
        call.went = self.where
        self.sent[key] = call
        call.timer = Deadline(left + SENT_MARGIN_S, lambda k: tell(me, _Overdue(k)), key)
        # the wait here counts against its timeout: sent late, it is still answered in time
        if not tell(target, replace(call.fwd, on_reply=on_reply, timeout=left)):
            del self.sent[key]
            call.timer.kill()
            self.suspect = True  # the Supervisor is about to name its successor
            self._hold(key, call)

    def _hold(self, key: int, call: _Call) -> None:
        me = self.actor_ref
        call.timer = Deadline(max(0.0, call.left()), lambda k: tell(me, _Overdue(k)), key)
        self.held[key] = call
        if self.suspect and self._probe is None:
            self._probe = Deadline(PROBE_S, lambda: tell(me, _Probe()))

    def _release(self, probe: bool = False) -> None:
        """Send every held call on to the target, oldest first (a probe sends them to a suspect
        one: each is safe to send, and the first answer clears it)."""
        held, self.held = self.held, {}
        for key, call in held.items():
            if call.timer is not None:
                call.timer.kill()
                call.timer = None
            if probe and self.where.ref is not None:
                self._send(key, call)
            else:
                self._route(key, call)

    def _overdue(self, key: int) -> None:
        call = self.held.pop(key, None)
        if call is not None:
            self._answer(call, UpstreamError(
                jsonrpc.REQUEST_TIMEOUT, f"server {self.server}: no instance could serve it within "
                f"{call.budget:g}s ({self.where.reason or 'its owner did not answer'})", server=self.server))
            return
        call = self.sent.pop(key, None)
        if call is not None:
            self._answer(call, UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"server {self.server} gave no answer "
                                             f"within {call.budget:g}s", server=self.server))

    def _answered(self, key: int, outcome) -> None:
        call = self.sent.pop(key, None)
        if call is None:
            return  # cancelled or overdue meanwhile: no answer is owed
        if call.timer is not None:
            call.timer.kill()
            call.timer = None
        went = call.went
        assert went is not None and went.ref is not None  # only a sent call is answered
        failure = _failure(outcome, went.relay)
        current = self.where.ref is not None and went.ref.actor_urn == self.where.ref.actor_urn
        if not failure:
            if self.suspect and current:  # it answers again: the held calls go now
                self.suspect = False
                self._release()
            self._answer(call, outcome)
            return
        if current:
            self.suspect = True
        if failure == "unsent" or (call.fwd.idempotent and not call.resent):
            call.resent = call.resent or failure != "unsent"
            (self.log.debug if failure == "unsent" else self.log.info)(
                "{} {} again when an owner answers ({})", "sending" if failure == "unsent" else "re-sending",
                call.fwd.method, outcome.message)
            self._route(key, call)  # to the current target, unless it is the one that failed
            return
        self._answer(call, UpstreamError(
            jsonrpc.SERVER_UNAVAILABLE,
            f"{call.fwd.method} to {self.server} was cut off: the link to instance {went.owner or '?'}, which "
            f"ran it, was lost with the call in flight. It may have run there, so troupe did not send it again "
            f"(only idempotent calls are re-sent). ({outcome.message})", server=self.server))

    def _retarget(self, where: FrontTarget) -> None:
        before = self.where.ref
        self.where = where
        if where.ref is not None and (before is None or where.ref.actor_urn != before.actor_urn):
            self.suspect = False  # a new Connection: nothing is known against it
        if where.ref is not None and not self.suspect:
            self._release()
        elif where.ref is None and not where.hold:
            self._answer_held(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, where.reason, server=self.server))

    def _cancel(self, cancel: CancelForward) -> None:
        """Held calls are dropped; sent ones are cancelled where they went (a whole session's
        cancel also reaches the current target, which drops that session's subscriptions)."""
        for key in [k for k, c in self.held.items() if matches(c.fwd, cancel.origin, cancel.origin_request)]:
            timer = self.held.pop(key).timer
            if timer is not None:
                timer.kill()
        targets = {}
        for key in [k for k, c in self.sent.items() if matches(c.fwd, cancel.origin, cancel.origin_request)]:
            call = self.sent.pop(key)
            if call.timer is not None:
                call.timer.kill()
            went = call.went
            if went is not None and went.ref is not None:
                targets[went.ref.actor_urn] = went.ref
        if cancel.origin_request is None and self.where.ref is not None:
            targets[self.where.ref.actor_urn] = self.where.ref
        for target in targets.values():
            tell(target, cancel)

    # ---------------------------------------------------------------- answers

    def _answer(self, call: _Call, outcome) -> None:
        try:
            call.fwd.on_reply(outcome)
        except Exception:  # one bad callback must not keep the others from their answer
            self.log.exception("reply handler for {} failed", call.fwd.method)

    def _answer_held(self, outcome) -> None:
        held, self.held = self.held, {}
        for call in held.values():
            if call.timer is not None:
                call.timer.kill()
            self._answer(call, outcome)

    def _kill_probe(self) -> None:
        if self._probe is not None:
            self._probe.kill()
            self._probe = None
