"""The one table of a Session's calls: everything it accepted and still owes an answer to.

Every request a Session takes that is not answered in the same turn is an entry here, whatever
does the work: a Connection (a forwarded call), a greenlet of the Session's own (a core tool, a
workflow run), the CacheKeeper (a lookup before the call goes on), a wait (for start-up to settle,
or for a restarted server to come back before an idempotent call is sent again) or the client
itself (an input round). Each entry has the Session's deadline on it, and the Session answers
it exactly once, by one method, from its own greenlet (Session._answer). A cancel or the
client's departure withdraws the entry: its work is stopped and no answer goes out.

The messages below are the ones work of a call tells its Session: each names its call by token
and finds nothing once the call was answered or withdrawn.
"""
from __future__ import annotations

from typing import Any, Callable

import gevent

from actors.deadline import Deadline

IDEMPOTENT_METHODS = frozenset({"resources/read", "prompts/get", "completion/complete"})
RETRY_WAIT = 15.0  # how long an idempotent call waits for its restarted server to come back

# What an entry is waiting for now.
FORWARDED = "forwarded"  # a Connection's answer
LOCAL = "local"  # a greenlet of the Session's own (core tool, workflow run)
LOOKUP = "lookup"  # the CacheKeeper's answer, then forwarded unless it hit
BACK = "back"  # its server to come back (the Connection died under an idempotent call)
SETTLING = "settling"  # start-up to settle (the first tools/list, a tool of a server still starting)
WAKING = "waking"  # its on-demand server to start (downstream/waking.py), within the call's own deadline


class Call:
    """One request a Session owes exactly one answer to.

    `rid` and `sink` are the client request awaiting it now: None while the call is parked
    (its client was answered input_required and has not retried yet). `method` and `params`
    are what goes upstream, kept for a retry and the next round of an input_required exchange,
    whose state (`rounds`) lives here too. `work` is the greenlet doing a LOCAL call's work, or
    the wait of a BACK or SETTLING one: stopped when the call is withdrawn."""

    __slots__ = ("rid", "server", "method", "params", "sink", "shape", "token", "ref", "retry", "timer",
                 "rounds", "phase", "progress_token", "work", "stop_with", "plan", "failure", "message", "principal",
                 "span", "audit", "wakes")

    def __init__(self, rid, sink, shape, token: int, phase: str):
        self.rid, self.sink, self.shape, self.token, self.phase = rid, sink, shape, token, phase
        self.server: str = ""
        self.method: str = ""
        self.params: Any = None
        self.ref: Any = None  # the Connection it went to (FORWARDED)
        self.retry = False  # sent once more if its Connection dies under it
        self.timer: Deadline | None = None
        self.rounds: Any = None  # an input_rounds.Rounds once the server asked for input
        self.progress_token: Any = None  # the client's, for progress relayed to it
        self.work: gevent.Greenlet | None = None
        self.stop_with: Callable[[str], BaseException] | None = None  # what stops `work` (None: GreenletExit)
        self.plan: Any = None  # a cache plan (LOOKUP)
        self.failure: Any = None  # BACK: the answer if the server does not come back in time
        self.message: Any = None  # SETTLING: the request, handled again once start-up settled
        self.principal: str = ""
        self.span: Any = None  # its upstream request's CLIENT span while FORWARDED, when traced (actors/ops)
        self.audit: Any = None  # an ops.observer.Begun while the audit trail follows this call
        self.wakes = 0  # how many starts of its on-demand server it waited for (waking.MAX_WAKES)

    @property
    def parked(self) -> bool:
        return self.rid is None


class CallTable:
    """The calls one Session owes answers to, by troupe's token for each (unique in the
    Session), with the client's request id → token beside it. Through it a cancellation stops
    the right work, a server→client request triggered by a call travels on the call's own
    stream, and the deadline the Session owns answers a call if nothing else does. A parked
    call has no client id until its client retries; the token still finds it.

    `on_deadline(token)` runs in a timer greenlet when a call's deadline passes; the Session
    passes a tell to its own mailbox. Used only from the Session's greenlet.
    """

    def __init__(self, on_deadline: Callable[[int], Any]) -> None:
        self._on_deadline = on_deadline
        self._calls: dict[int, Call] = {}
        self._by_rid: dict[Any, int] = {}
        self.last_token = 0  # the newest call's; tokens only grow

    def __len__(self) -> int:
        return len(self._calls)

    def open(self, rid, sink, shape, phase: str, deadline: float) -> Call:
        """Record a call the Session has just accepted, its deadline `deadline` seconds away."""
        self.last_token = token = self.last_token + 1
        call = self._calls[token] = Call(rid, sink, shape, token, phase)
        if rid is not None:
            self._by_rid[rid] = token  # a reused id now names this call; the earlier one is still answered
        call.timer = Deadline(deadline, self._on_deadline, token)
        return call

    def calls(self) -> list[Call]:
        """The calls awaiting an answer now (a copy: answering one may settle others)."""
        return list(self._calls.values())

    def parked_count(self) -> int:
        return sum(1 for call in self._calls.values() if call.parked)

    def get(self, rid) -> Call | None:
        """The call client request `rid` awaits."""
        token = self._by_rid.get(rid) if isinstance(rid, (str, int)) and not isinstance(rid, bool) else None
        return self._calls.get(token) if token is not None else None

    def current(self, token) -> Call | None:
        """The call `token` names, if it is still owed an answer (not cancelled or expired)."""
        return self._calls.get(token) if isinstance(token, int) else None

    def rearm(self, call: Call, deadline: float) -> None:
        """A new deadline for `call` (it moved on to a wait, or to its server)."""
        _kill(call.timer)
        call.timer = Deadline(deadline, self._on_deadline, call.token)

    def settle(self, token: int, why: str = "the call was answered") -> Call | None:
        """Take the call `token` names out of the table, its deadline dropped: it gets its answer
        now (its work, if any, is what answered, or has ended)."""
        call = self._calls.pop(token, None) if isinstance(token, int) else None
        if call is not None:
            self._unlink(call)
            _kill(call.timer)
            if call.span is not None:  # an upstream span still open ends with its call, whatever ended it
                call.span.end(why)
        return call

    def withdraw(self, rid, reason: str) -> Call | None:
        """The client cancelled `rid`: no answer is owed any more, and its work stops."""
        call = self.get(rid)
        return self.stop(call.token, reason) if call is not None else None

    def stop(self, token: int, reason: str) -> Call | None:
        """Take the call out unanswered (or to be answered by the caller), its work stopped."""
        call = self.settle(token, reason)
        if call is not None:
            _stop(call, reason)
        return call

    def park(self, call: Call) -> None:
        """Its client has been answered input_required: the call waits for a retry, under no id
        and with no deadline of its own (the parking has one)."""
        self._unlink(call)
        call.rid = call.sink = None
        _kill(call.timer)
        call.timer = None

    def attach(self, call: Call, rid, sink, shape, deadline: float) -> None:
        """A retry resumes parked `call`: its answer now goes to request `rid`, due within `deadline` s."""
        call.rid, call.sink, call.shape = rid, sink, shape
        self._by_rid[rid] = call.token
        call.timer = Deadline(deadline, self._on_deadline, call.token)

    def close(self, reason: str) -> list[Call]:
        """Every call taken out unanswered, its deadline and work stopped; the Session answers
        or cancels each."""
        calls, self._calls, self._by_rid = list(self._calls.values()), {}, {}
        for call in calls:
            _kill(call.timer)
            if call.span is not None:
                call.span.end(reason)
            _stop(call, reason)
        return calls

    def _unlink(self, call: Call) -> None:
        if call.rid is not None and self._by_rid.get(call.rid) == call.token:
            del self._by_rid[call.rid]


def _kill(timer) -> None:
    if timer is not None:
        timer.kill(block=False)


def _stop(call: Call, reason: str) -> None:
    rounds = call.rounds
    if rounds is not None and getattr(rounds, "timer", None) is not None:  # a parked call's own timer
        _kill(rounds.timer)
        rounds.timer = None
    work, call.work = call.work, None
    if work is None or work.dead or work is gevent.getcurrent():
        return
    if call.stop_with is not None:
        work.kill(call.stop_with(reason), block=False)
    else:
        work.kill(block=False)


class CallDone:
    """Told by a LOCAL call's greenlet to its Session: its outcome (a result, an UpstreamError,
    or, `answered`, a whole JSON-RPC answer already shaped by the work)."""

    __slots__ = ("token", "outcome", "answered")

    def __init__(self, token: int, outcome, answered: bool = False) -> None:
        self.token, self.outcome, self.answered = token, outcome, answered


class CallNotice:
    """Told by the work of a call to its Session: a notification (progress, a workflow's log)
    for the call's client, sent on the call's own stream while the call is still owed."""

    __slots__ = ("token", "message")

    def __init__(self, token: int, message: dict) -> None:
        self.token, self.message = token, message


class Progressed:
    """Told by a Connection's progress relay to the Session: upstream progress for call `token`
    (relayed under the client's own progressToken)."""

    __slots__ = ("token", "params")

    def __init__(self, token: int, params: dict) -> None:
        self.token, self.params = token, params


class ServerBack:
    """Told by a BACK call's wait to its Session: the call's server has a live Connection again."""

    __slots__ = ("token",)

    def __init__(self, token: int) -> None:
        self.token = token


class Settled:
    """Told by a SETTLING call's wait to its Session: start-up settled (or its wait ran out)."""

    __slots__ = ("token",)

    def __init__(self, token: int) -> None:
        self.token = token


def withdrawn(call: Call) -> None:
    """Tell the front that carries a withdrawn call's request that no answer will come, so it can
    end that request now (a POST's stream closes at once); fronts without the hook need nothing."""
    hook = getattr(call.sink, "withdrawn", None)
    if hook is not None:
        hook(call.rid)


def wait_for_server(connection: Callable[[], Any], dead_ref, report: Callable[[], Any]) -> None:
    """A BACK call's work: poll (bounded by the call's deadline, which kills it) until
    `connection()` (the call's server, for its client) is live and not `dead_ref`, then
    `report()` (a guarded tell)."""
    while connection() in (None, dead_ref):
        gevent.sleep(0.05)
    report()


def progress_notice(token, params: dict) -> dict:
    """Upstream progress (for troupe's own token) as the client's, under the client's token."""
    out = {"progressToken": token, "progress": params.get("progress", 0)}
    for key in ("total", "message"):
        if key in params:
            out[key] = params[key]
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": out}
