"""Forwarding helpers for sessions: the table of forwarded requests a client awaits with their
deadlines, the retry of an idempotent request after a reconnect, and progress relayed under
the client's own token."""
from __future__ import annotations

import itertools
from typing import Any, Callable

import gevent
import pykka

from actors.deadline import Deadline
from actors.protocol import jsonrpc

IDEMPOTENT_METHODS = frozenset({"resources/read", "prompts/get", "completion/complete"})
RETRY_WAIT = 15.0  # how long an idempotent request waits for its server to come back


class Call:
    """One forwarded request a Session owes exactly one answer to.

    `rid` and `sink` are the client request awaiting it now: None while the call is parked
    (its client was answered input_required and has not retried yet). `method` and `params`
    are what went upstream, kept for the next round of an input_required exchange, whose
    state (`rounds`) lives here too."""

    __slots__ = ("rid", "server", "method", "params", "sink", "shape", "token", "ref", "retry", "timer", "rounds")

    def __init__(self, rid, server, method, params, sink, shape, token, ref, retry):
        self.rid, self.server, self.method, self.params = rid, server, method, params
        self.sink, self.shape, self.token, self.ref, self.retry = sink, shape, token, ref, retry
        self.timer: Deadline | None = None
        self.rounds: Any = None  # an input_rounds.Rounds once the server asked for input

    @property
    def parked(self) -> bool:
        return self.rid is None


class ForwardedCalls:
    """The requests one client awaits, by troupe's token for each (unique in the Session), with
    the client's request id → token beside it. Through it a cancellation reaches the right
    upstream, a server→client request triggered by a call travels on the call's own stream, and
    the deadline the Session owns answers a call if nothing else does. A parked call has no
    client id until its client retries; the token still finds it.

    `on_deadline(token)` runs in a timer greenlet when a call's deadline passes; the Session
    passes a tell to its own mailbox. Used only from the Session's greenlet.
    """

    def __init__(self, on_deadline: Callable[[int], Any]) -> None:
        self._on_deadline = on_deadline
        self._calls: dict[int, Call] = {}
        self._by_rid: dict[Any, int] = {}
        self._tokens = itertools.count(1)

    def __len__(self) -> int:
        return len(self._calls)

    def open(self, rid, server: str, method: str, params, sink, shape, ref, retry: Retry | None,
             deadline: float) -> int:
        """Record a call about to be forwarded, its deadline `deadline` seconds away; its token."""
        token = next(self._tokens)
        call = self._calls[token] = Call(rid, server, method, params, sink, shape, token, ref, retry)
        self._by_rid[rid] = token  # a reused id now names this call; the earlier one is still answered
        call.timer = Deadline(deadline, self._on_deadline, token)
        return token

    def calls(self) -> list[Call]:
        """The calls awaiting an answer now (a copy: answering one may settle others)."""
        return list(self._calls.values())

    def parked_count(self) -> int:
        return sum(1 for call in self._calls.values() if call.parked)

    def get(self, rid) -> Call | None:
        """The call client request `rid` awaits."""
        token = self._by_rid.get(rid) if isinstance(rid, (str, int)) else None
        return self._calls.get(token) if token is not None else None

    def current(self, token) -> Call | None:
        """The call `token` names, if it is still owed an answer (not cancelled or expired)."""
        return self._calls.get(token) if isinstance(token, int) else None

    def settle(self, token: int) -> Call | None:
        """Take the call `token` names out of the table, its deadline dropped: it gets its answer now."""
        call = self._calls.pop(token, None) if isinstance(token, int) else None
        if call is not None:
            self._unlink(call)
            _kill(call.timer)
        return call

    def withdraw(self, rid) -> Call | None:
        """The client cancelled `rid`: no answer is owed any more."""
        call = self.get(rid)
        return self.settle(call.token) if call is not None else None

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

    def close(self) -> set:
        """Every call dropped unanswered; the connections they were sent to, to tell them so."""
        calls, self._calls, self._by_rid = list(self._calls.values()), {}, {}
        for call in calls:
            _kill(call.timer)
        return {call.ref for call in calls}

    def _unlink(self, call: Call) -> None:
        if call.rid is not None and self._by_rid.get(call.rid) == call.token:
            del self._by_rid[call.rid]


def _kill(timer) -> None:
    if timer is not None:
        timer.kill(block=False)


class Retry:
    """An idempotent request to send again now that its server is back."""

    __slots__ = ("rid", "server", "method", "params", "sink", "shape", "token")

    def __init__(self, rid, server, method, params, sink, shape, token):
        self.rid, self.server, self.method, self.params = rid, server, method, params
        self.sink, self.shape, self.token = sink, shape, token


def retry_when_back(rt, session_ref, server: str, dead_ref, failure, retry: Retry) -> None:
    """Edge greenlet: wait (bounded) for a new live connection, then hand the retry back."""
    deadline = gevent.get_hub().loop.now() + RETRY_WAIT
    while rt.connection(server) in (None, dead_ref):
        if gevent.get_hub().loop.now() > deadline:
            retry.sink(retry.shape(retry.rid, failure))
            return
        gevent.sleep(0.05)
    try:
        session_ref.tell(retry)
    except pykka.ActorDeadError:
        pass


def progress_relay(token, sink):
    """Upstream progress (for troupe's own token) back to the client, under the client's token."""
    def relay(params: dict) -> None:
        out = {"progressToken": token, "progress": params.get("progress", 0)}
        for key in ("total", "message"):
            if key in params:
                out[key] = params[key]
        sink(jsonrpc.notification("notifications/progress", out))
    return relay
