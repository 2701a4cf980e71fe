"""The requests one Connection has sent upstream and still awaits: ids, deadlines, one answer each.

A plain object, not an actor: only its Connection's greenlet touches it. Deadline timers run in
their own greenlets and only call `on_deadline(request_id)`, which the Connection turns into a
tell to itself, so a timeout is handled in the actor's own turn like every other message.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from loguru import logger

from actors.deadline import Deadline
from actors.messages import NOT_A_CALLER, UpstreamError
from actors.protocol import jsonrpc, server_shapes
from actors.upstream.stats import ServerStats


def never_sent(server: str, why: str) -> UpstreamError:
    """The answer for a call that never left troupe (`why`, e.g. "x: connection stopped"): a link
    lost before any of it ran, so a Session or FailoverFront may send it on (link "unsent")."""
    return UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"{why} before the call was sent", server=server,
                         link_lost=True, link="unsent")


def usable_id(value) -> bool:
    """A JSON-RPC id troupe can look up: a string, a number or null (a list or an object is not,
    and true would pass for request 1)."""
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


def matches(entry, origin, origin_request) -> bool:
    """Whether a pending request or a queued Forward belongs to a cancellation: the same calling
    session, and the same client request unless the whole session is going (origin_request None)."""
    return entry.origin == origin and (origin_request is None or entry.origin_request == origin_request)


def outcome_of(reply: dict, server: str):
    """A response message as the answer its request gets: the result (an object), or an UpstreamError."""
    error = reply.get("error")
    if error is None:
        result = reply.get("result")
        return result if isinstance(result, dict) else {}
    if not isinstance(error, dict):
        error = {"code": jsonrpc.INTERNAL_ERROR, "message": str(error)}
    return UpstreamError(error.get("code", jsonrpc.INTERNAL_ERROR), str(error.get("message", "")),
                         error.get("data"), server=server)


def _tellable(origin) -> bool:
    """A caller a request can be routed to: a Session's ref or a relayed call (not a listen's tuple)."""
    return origin is not None and hasattr(origin, "tell")


def _client_of(origin):
    """Who is behind a pending entry's origin: a Session's listen streams (`(ref, kind, id)`) are
    that Session's; every other origin is its own client (a Session, one relayed call)."""
    if isinstance(origin, tuple) and origin and hasattr(origin[0], "tell"):
        origin = origin[0]
    return getattr(origin, "actor_urn", None) or id(origin)


@dataclass(slots=True)
class Pending:
    """One request sent upstream and still awaited: how to answer it, its timer, and for a
    client's call (`counted`) its progress relay and the calling session and request id."""

    method: str
    on_reply: Callable[[Any], None]
    timer: Deadline | None
    started: float
    timeout: float
    counted: bool = False  # a client call (stats, in-flight) rather than troupe's own request
    on_progress: Callable[[dict], None] | None = None
    origin: Any = None
    origin_request: Any = None
    caller: Any = None  # Forward.caller: who is behind it, when its origin speaks for many


class RequestTable:
    """Owns the ids of one Connection's requests and their pending entries: each gets a deadline
    timer when it is opened and exactly one answer, by `complete`, `time_out` or `fail_all`
    (`cancel_matching` withdraws entries without answering: their caller asked for that).

    Client calls (`counted`) are kept in `stats`: in_flight while pending, a latency and an
    outcome once answered, a timeout when timed out. Answers for ids no longer pending (after a
    timeout, a cancel or a fail-all) are dropped and counted in `late`.
    """

    def __init__(self, stats: ServerStats, on_deadline: Callable[[int], None], *, log=logger) -> None:
        self.stats = stats
        self._on_deadline = on_deadline  # runs in the timer's greenlet: must only tell the owner
        self._log = log
        self._next_id = 0
        self._pending: dict[int, Pending] = {}
        self.late = 0  # answers that came for a request no longer pending

    def __len__(self) -> int:
        return len(self._pending)

    def busy(self, ignored: tuple = ()) -> bool:
        """Any request pending but those of the `ignored` methods (a standing listen stream)."""
        return any(pending.method not in ignored for pending in self._pending.values())

    def __contains__(self, request_id) -> bool:
        return usable_id(request_id) and request_id in self._pending

    def get(self, request_id) -> Pending | None:
        """The pending entry for an id from the wire, whatever its type (None if unusable or gone)."""
        return self._pending.get(request_id) if usable_id(request_id) else None

    def open(self, method: str, on_reply: Callable[[Any], None], *, timeout: float, counted: bool = False,
             on_progress=None, origin=None, origin_request=None, caller=None) -> int:
        """A new request: its id (unique on this table), with its deadline timer started."""
        self._next_id += 1
        rid = self._next_id
        timer = Deadline(timeout, self._on_deadline, rid)
        self._pending[rid] = Pending(method, on_reply, timer, time.perf_counter(), timeout, counted,
                                     on_progress, origin, origin_request, caller)
        if counted:
            self.stats.in_flight += 1
        return rid

    def complete(self, request_id, outcome) -> Pending | None:
        """Answer a pending request once; the entry, or None if it was answered already (counted late)
        or the id cannot be one of ours."""
        if not usable_id(request_id):
            return None  # not an id troupe gave out: nothing to answer, nothing late
        pending = self._take(request_id)
        if pending is None:
            self.late += 1
            return None
        if pending.counted:
            self.stats.record(time.perf_counter() - pending.started, not isinstance(outcome, UpstreamError))
        self._answer(pending, outcome)
        return pending

    def outcome(self, reply: dict, pending: Pending, server: str):
        """A response from the wire as the answer its request gets. One that does not fit the
        request's method (server_shapes) becomes an UpstreamError naming the server and the field,
        so the caller is told and no actor reads a value of the wrong type; a log line says so too."""
        problem = server_shapes.answer_problem(reply, pending.method)
        if problem is None:
            return outcome_of(reply, server)
        self._log.warning("malformed answer to {}: {}", pending.method, problem)
        return UpstreamError(jsonrpc.INTERNAL_ERROR, f"server {server} sent a malformed answer to "
                                                     f"{pending.method}: {problem}", server=server)

    def drop_late(self, request_id) -> None:
        """An answer for an id that is not pending: dropped, counted."""
        self.late += 1
        self._log.debug("dropped reply for unknown or finished request {!r}", request_id)

    def time_out(self, request_id, outcome) -> Pending | None:
        """The deadline passed (told through the owner's mailbox): answer with outcome, counted as a
        timeout; None if it was answered meanwhile."""
        pending = self.get(request_id)
        if pending is None:
            return None
        if pending.counted:
            self.stats.timeouts += 1
        return self.complete(request_id, outcome)

    def cancel_matching(self, origin, origin_request) -> list[int]:
        """Withdraw, unanswered, the requests of a cancelled client call (or of a whole session when
        origin_request is None); their ids, for the cancellation sent upstream."""
        doomed = [rid for rid, p in self._pending.items() if matches(p, origin, origin_request)]
        for rid in doomed:
            self._take(rid)
        return doomed

    def withdraw(self, request_id) -> Pending | None:
        """Take one of troupe's own requests back unanswered (its owner stopped wanting it)."""
        return self._take(request_id)

    def asker(self, related=None, task=None) -> tuple[Any, Any] | str:
        """(caller, its request) of the client call a server's request belongs to, or why troupe
        cannot tell. The call whose response stream carried it (`related`, Streamable HTTP) says so
        outright; otherwise it is the newest call of the one client with calls in flight here. With
        calls of two or more clients in flight, or none, nobody is asked: a question must never
        reach a client whose call did not ask it. Every call the TaskKeeper makes names its own
        caller (each task apart, whoever's client it is), and its polls none at all. A question
        naming its task (`task`: the 2025-11-25 related-task id, over any transport) goes to the
        request following that task, if one does (its caller is `("follows", task)`)."""
        if task is not None:
            for p in self._pending.values():
                if p.caller == ("follows", task) and _tellable(p.origin):
                    return p.origin, p.origin_request
        if related is not None:
            pending = self.get(related)
            if pending is not None and _tellable(pending.origin):
                return pending.origin, pending.origin_request
            return "it came on the stream of a request that is no client's call in progress"
        clients: set = set()
        newest = None
        for p in self._pending.values():
            if p.origin is None or p.caller is NOT_A_CALLER:
                continue  # troupe's own request (a listing, a ping, a task's poll)
            clients.add(_client_of(p.origin) if p.caller is None else p.caller)
            if len(clients) > 1:
                return (f"calls of {len(clients)} or more clients are in flight to this server and troupe cannot "
                        "tell whose call asked (set `share: per_client` on the server to give each client its own)")
            if _tellable(p.origin):
                newest = p
        if newest is None:
            return "it was not sent while a client's request to this server was in progress"
        return newest.origin, newest.origin_request

    def fail_all(self, outcome) -> int:
        """Answer every pending request with outcome, each exactly once; how many there were."""
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if p.timer is not None:
                p.timer.kill(block=False)
            if p.counted:
                self.stats.in_flight -= 1
                self.stats.record(time.perf_counter() - p.started, False)
            self._answer(p, outcome)
        return len(pending)

    def _take(self, request_id) -> Pending | None:
        """Remove an entry (its timer stopped, its slot freed) without answering it."""
        pending = self._pending.pop(request_id, None) if usable_id(request_id) else None
        if pending is None:
            return None
        if pending.timer is not None:
            pending.timer.kill(block=False)
        if pending.counted:
            self.stats.in_flight -= 1
        return pending

    def _answer(self, pending: Pending, outcome) -> None:
        try:
            pending.on_reply(outcome)
        except Exception:  # one bad callback must not keep the others from their answer
            self._log.exception("reply handler for {} failed", pending.method)

