"""Forwarding helpers for sessions: the table of forwarded requests a client awaits with their
deadlines, the retry of an idempotent request after a reconnect, and progress relayed under
the client's own token."""
from __future__ import annotations

import itertools
from typing import Any, Callable

import gevent
import pykka

from actors.protocol import jsonrpc

IDEMPOTENT_METHODS = frozenset({"resources/read", "prompts/get", "completion/complete"})
RETRY_WAIT = 15.0  # how long an idempotent request waits for its server to come back


class Call:
    """One forwarded request a Session owes exactly one answer to."""

    __slots__ = ("server", "sink", "shape", "token", "ref", "retry", "timer")

    def __init__(self, server, sink, shape, token, ref, retry):
        self.server, self.sink, self.shape, self.token, self.ref, self.retry = server, sink, shape, token, ref, retry
        self.timer: gevent.Greenlet | None = None


class ForwardedCalls:
    """The requests one client awaits: client request id → Call. Through it a cancellation reaches
    the right upstream, a server→client request triggered by a call travels on the call's own
    stream, and the deadline the Session owns answers a call if nothing else does.

    `on_deadline(rid, token)` runs in a timer greenlet when a call's deadline passes; the Session
    passes a tell to its own mailbox. Used only from the Session's greenlet. A token tells a call
    from an earlier one that used the same client id.
    """

    def __init__(self, on_deadline: Callable[[Any, int], Any]) -> None:
        self._on_deadline = on_deadline
        self._calls: dict[Any, Call] = {}
        self._tokens = itertools.count(1)

    def __len__(self) -> int:
        return len(self._calls)

    def open(self, rid, server: str, sink, shape, ref, retry: Retry | None, deadline: float) -> int:
        """Record a call about to be forwarded, its deadline `deadline` seconds away; its token."""
        token = next(self._tokens)
        call = self._calls[rid] = Call(server, sink, shape, token, ref, retry)
        call.timer = gevent.spawn_later(deadline, self._on_deadline, rid, token)
        return token

    def calls(self) -> list[Call]:
        """The calls awaiting an answer now (a copy: answering one may settle others)."""
        return list(self._calls.values())

    def get(self, rid) -> Call | None:
        return self._calls.get(rid) if isinstance(rid, (str, int)) else None

    def current(self, rid, token: int) -> Call | None:
        """The call `rid` if it is still the one `token` names (not cancelled, expired or reused)."""
        call = self.get(rid)
        return call if call is not None and call.token == token else None

    def settle(self, rid, token: int) -> Call | None:
        """Take the call `token` names out of the table, its deadline dropped: it gets its answer now."""
        call = self.current(rid, token)
        if call is not None:
            del self._calls[rid]
            _kill(call.timer)
        return call

    def withdraw(self, rid) -> Call | None:
        """The client cancelled `rid`: no answer is owed any more."""
        call = self._calls.pop(rid, None) if isinstance(rid, (str, int)) else None
        if call is not None:
            _kill(call.timer)
        return call

    def close(self) -> set:
        """Every call dropped unanswered; the connections they were sent to, to tell them so."""
        calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            _kill(call.timer)
        return {call.ref for call in calls}


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
