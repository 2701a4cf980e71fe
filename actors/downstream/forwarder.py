"""The Session's one answer path: every call it accepts goes through here into its CallTable,
and out again by `answer`, exactly once (or not at all, once withdrawn).

A forwarded call is sent to its server's Connection (`forward`, `send`); the Connection's answer
(`settle`), a link lost under an idempotent call (a wait for the server, then `server_back`),
the Session's deadline (`expire`), a cancel (`cancel`) or the client's leaving (`cancel_all`)
decide what becomes of it. Calls troupe answers itself run as tracked work (`track`); a request
that came before start-up settled waits in the table (`defer`, then `settled`). Progress and a
tracked call's notices reach the client through the Session's mailbox and `notice`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import gevent
from loguru import logger

from actors.downstream.calls import (
    BACK, FORWARDED, IDEMPOTENT_METHODS, LOCAL, LOOKUP, RETRY_WAIT, SETTLING, WAKING, Call, CallTable, Progressed,
    ServerBack, Settled, progress_notice, wait_for_server, withdrawn,
)
from actors.downstream import waking
from actors.messages import CancelForward, Forward, ForwardReplied, UpstreamError
from actors.ops import records as audit
from actors.protocol import eras, jsonrpc, mcp, modern
from actors.tells import tell

if TYPE_CHECKING:
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.lifecycle import Handshake

# The connection's own timeout answers first (and cancels upstream); this margin on top of it
# is the caller's net for a callee that can no longer answer at all.
DEADLINE_MARGIN = 2.0


class Forwarder(waking.WakingCalls):
    """Owns the Session's CallTable and every way a call in it is answered (see the module's
    docstring). A plain object used only from its Session's greenlet, with explicit inputs: the
    Session's context and ref, its client's view and handshake state, and `handle(msg, sink,
    principal)`, which handles a deferred request again. `rounds` (the calls' input rounds) and
    `cache_answered` (a lookup's end) are set by the Session once those exist: they and this
    object call each other."""

    def __init__(self, ctx: SessionContext, me, key: str, table: CallTable, view: ClientView,
                 handshake: Handshake, handle: Callable[[dict, Any, str], None]) -> None:
        self._ctx, self._me, self._key, self.table = ctx, me, key, table
        self._view, self._handshake, self._handle = view, handshake, handle
        self.rounds: Any = None  # InputRounds
        self.cache_answered: Callable[[int, Any], None] = lambda token, found: None
        self._after_wait = False
        # The audit trail's side of this Session (None without one: every hook is that one check).
        profile = view.profile.name if view.profile is not None else None
        self.audit = ctx.observer.session(key, view.client_name, profile) if ctx.observer is not None else None

    # ---------------------------------------------------------------- the one answer

    def answer(self, token: int, outcome, shaped: bool = False) -> None:
        """The one answer of call `token` (nothing if it was answered, cancelled or withdrawn):
        `outcome` shaped by the call's shape, or already a whole answer (`shaped`). A session's
        client gets the outcome without what only the modern era has (eras.for_legacy); a modern
        request's sink gives its result the modern shape itself (modern.finish)."""
        call = self.table.settle(token)
        if call is None or call.sink is None:
            return
        if shaped:
            answer = outcome
        else:
            if type(outcome) is dict and not isinstance(call.sink, modern.ModernSink):
                outcome = eras.for_legacy(outcome)  # a session's client: no modern-only field (ModernSink: finish)
            try:
                answer = call.shape(call.rid, outcome)
            except Exception as exc:  # a bad outcome fails its own call, never the Session
                logger.opt(exception=exc).error("session {}: shaping the answer of {} failed", self._key,
                                                call.method or "a call")
                answer = jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR,
                                       f"troupe internal error answering {call.method or 'the call'}: {exc}")
        if call.audit is not None and self.audit is not None:
            self.audit.answered(call.audit, outcome, from_cache=call.phase == LOOKUP)
        call.sink(answer)

    def fail(self, token: int, why: str) -> None:
        """Call `token` hit a bug in troupe: its work stops (upstream too) and it is answered with
        an internal error."""
        call = self.table.stop(token, why)
        if call is None:
            return
        self.ended(call, audit.ERROR, jsonrpc.INTERNAL_ERROR)
        if call.phase == FORWARDED and call.ref is not None:
            tell(call.ref, CancelForward(self._me, token, why))
        if call.sink is not None:
            _deliver(call.sink, jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR, why))

    def notice(self, token: int, message: dict) -> None:
        """A notification for call `token`'s client, on the call's own stream, while it is owed."""
        call = self.table.current(token)
        if call is not None and call.sink is not None:
            call.sink(message)

    def progress(self, token: int, params: dict) -> None:
        """Upstream progress for call `token`, relayed under its client's own progressToken."""
        call = self.table.current(token)
        if call is not None and call.sink is not None and call.progress_token is not None:
            call.sink(progress_notice(call.progress_token, params))

    # ---------------------------------------------------------------- calls troupe answers itself

    def track(self, rid, sink, shape, work, deadline: float, stop_with=None, method: str = "",
              audited: tuple | None = None) -> int:
        """Accept a call troupe answers itself: `work(token)` runs in a greenlet of its own (a core
        tool, a workflow run) and ends by telling CallDone; a cancel or the client's leaving stops it.
        `audited`: (server, target, arguments) of a tools/call the audit trail records."""
        call = self.table.open(rid, sink, shape, LOCAL, deadline)
        call.method, call.stop_with = method, stop_with
        if audited is not None and self.audit is not None:
            call.audit = self.audit.begin_named("tools/call", *audited, sink)
        call.work = gevent.spawn(work, call.token)
        return call.token

    def starting_up(self) -> bool:
        return not self._after_wait and not self._ctx.settled.is_set()

    def defer(self, msg, sink) -> None:
        """Answer once every auto-start server is ready or failed, bounded by startup_wait: the
        request waits in the call table (a cancel withdraws it), then is handled again."""
        settled, wait = self._ctx.settled, self._ctx.serve.startup_wait
        call = self.table.open(msg["id"], sink, None, SETTLING, wait)
        call.message, call.method = msg, str(msg.get("method"))
        call.principal = getattr(sink, "principal", "") or self._key  # a modern request's own, kept on its sink
        me, token = self._me, call.token

        def later(_token) -> None:
            settled.wait(timeout=wait)
            tell(me, Settled(token))
        call.work = gevent.spawn(later, token)

    def settled(self, token: int) -> None:
        """Start-up settled (or its wait ran out): the deferred request is handled now."""
        call = self.table.stop(token, "start-up settled")  # its wait ends here (if the deadline came first)
        if call is None or call.sink is None:
            return  # cancelled while it waited
        self._after_wait = True
        try:
            self._handle(call.message, call.sink, call.principal)
        except Exception as exc:  # out of the table already: its answer is owed from here
            logger.opt(exception=exc).error("session {}: a deferred request failed", self._key)
            _deliver(call.sink, jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR, f"troupe internal error: {exc}"))
        finally:
            self._after_wait = False

    # ---------------------------------------------------------------- forwarded calls

    def admit(self, rid, server: str, method: str, sink, params=None) -> bool:
        """The client's rate limits (actors/ratelimit) let this call to `server` go: True, or False
        once it is answered with the refusal (at once, never queued; in the audit trail and the
        dashboard's last failures as `rate_limited`). A modern client's retry that resumes a call
        troupe parked (its sealed state says so) continues a call counted already; any other retry
        (answers with no state, a server's own round sent again) reaches the server anew and counts."""
        rates = self._ctx.rates
        retry = sink.retry if isinstance(sink, modern.ModernSink) else None
        if rates is None or (retry is not None and isinstance(retry.state, dict) and retry.state.get("k") == "p"):
            return True
        view = self._view
        refusal = rates.admit(view.client_name, view.profile.name if view.profile is not None else None,
                              server, method, self._key)
        if refusal is None:
            return True
        if self.audit is not None:
            self.audit.refused(method, server, params, sink, audit.RATE_LIMITED, jsonrpc.RATE_LIMITED)
        sink(refusal.error(rid))
        return False

    def forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                retry: bool | None = None, admitted: bool = False) -> None:
        """Accept a call for the owning connection; `shape(rid, outcome)` builds its one answer.
        Checked against the rate limits first, unless the caller did (`admitted`).

        An idempotent read whose connection died under it is sent once more when the
        server is back (bounded, and in the table: a cancel stops it); a tools/call only when
        `retry` says so.
        """
        if not admitted and not self.admit(rid, server, method, sink, params):
            return
        if isinstance(sink, modern.ModernSink) and sink.retry is not None:  # a modern client's next round
            continued = self.rounds.continue_round(rid, server, method, params, sink, shape)
            if continued is None:
                return
            params = continued
        call = self.table.open(rid, sink, shape, FORWARDED, self._ctx.server_timeout(server) + DEADLINE_MARGIN)
        call.server, call.method, call.params, call.progress_token = server, method, params, progress_token
        call.retry = method in IDEMPOTENT_METHODS if retry is None else retry
        self.began(call)
        self.send(call)

    def began(self, call: Call) -> None:
        """The audit trail follows `call` (its server, method and params set) from now on."""
        if self.audit is not None:
            tracing = self._ctx.tracing  # the audit line names the call's trace
            call.audit = self.audit.begin(call.method, call.server, call.params, call.sink,
                                          tracing.trace_of(call.sink) if tracing is not None else None)

    def ended(self, call: Call, outcome: str, code: int | None = None) -> None:
        """`call` ended unanswered, or answered here with an error: its audit record."""
        if call.audit is not None and self.audit is not None:
            self.audit.ended(call.audit, outcome, code)

    def send(self, call: Call) -> None:
        """Send `call` to its server's Connection now (answered at once when there is none)."""
        server, token, me = call.server, call.token, self._me
        ref, status = self.connection(server, call.sink)
        if ref is None:
            if waking.waits(self._ctx.servers().get(server), call.wakes):  # on demand: it starts for this call
                self._wake(call, None)
                return
            self.answer(token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, status, server=server))
            return
        call.phase, call.ref = FORWARDED, ref

        def on_reply(outcome) -> None:  # runs in the connection's greenlet: a tell, nothing else
            tell(me, ForwardReplied(token, outcome))

        def relay_progress(params: dict) -> None:  # the same: progress reaches the client through the mailbox
            tell(me, Progressed(token, params))
        # only a call that asked for progress hands a relay to its Connection
        on_progress = relay_progress if call.progress_token is not None else None
        sink, params, tracing = call.sink, call.params, self._ctx.tracing
        if tracing is not None:  # its CLIENT span (call.span), whose context goes upstream in _meta
            params = tracing.sending(call, self._ctx.servers().get(server))
        if not tell(ref, Forward(call.method, params, on_reply, on_progress=on_progress,
                                 origin=me, origin_request=token,
                                 client_capabilities=self.relayed_capabilities(sink),
                                 log_level=relayed_log_level(sink), client=self._view.client_name,
                                 idempotent=call.retry)):
            self.settle(token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, f"server {server} went away",
                                             server=server, link_lost=True))

    def connection(self, server: str, sink) -> tuple:
        """(the Connection a call of this client to `server` goes to, or None; why not). For a
        `share: per_client` server it is this client's own upstream (an anonymous stateless caller
        has none). Reads published snapshots only: any greenlet may ask."""
        return self._ctx.connection_or_status(server, self._me, self._view.client_name is None and
                                              isinstance(sink, modern.ModernSink))

    def relayed_capabilities(self, sink) -> Any:
        """What a forwarded request tells a modern upstream of its client: a modern request's own
        declared capabilities; a legacy session's from its initialize (troupe turns a modern
        upstream's input requests into real requests to that client)."""
        envelope = modern.envelope_of(sink)
        caps = envelope.capabilities if envelope is not None else self._handshake.client_caps
        extensions = caps.get("extensions") if isinstance(caps, dict) else None
        if isinstance(extensions, dict) and mcp.TASKS_EXTENSION in extensions:
            # Only a call sent through the TaskKeeper may be answered with a task: it seals the
            # server's task id for this client (actors/tasks). Any other call goes without it.
            caps = {**caps, "extensions": {k: v for k, v in extensions.items() if k != mcp.TASKS_EXTENSION}}
        return caps

    def settle(self, token: int, outcome) -> None:
        """A Connection's answer to call `token`: its one answer, or its next input round, or (its
        link lost under an idempotent call) a wait for the server to come back."""
        call = self.table.current(token)
        if call is None or call.phase != FORWARDED:
            return  # cancelled, expired, or a late answer of a Connection it no longer waits for
        if call.span is not None:  # the upstream request is over, whatever becomes of the call
            call.span.end(outcome)
        if call.parked:  # it ended while its client was away: kept for the retry (InputRounds)
            assert call.rounds is not None  # only a call with rounds is parked
            call.rounds.outcome = outcome
            return
        if modern.input_required(outcome):
            self.rounds.input_required(call, outcome)
            return
        if type(outcome) is UpstreamError and waking.resent(self._ctx.servers().get(call.server), outcome, call.wakes):
            self._wake(call, call.ref)  # its Connection was stopping for idleness: the next start takes it
            return
        if call.retry and isinstance(outcome, UpstreamError) and outcome.link_lost:
            self._await_server(call, outcome)
            return
        self.answer(token, outcome)

    def _await_server(self, call: Call, failure: UpstreamError) -> None:
        """The Connection died under an idempotent call: it waits in the table (RETRY_WAIT at
        most) for the server's next Connection, then goes to it once."""
        dead, me, token = call.ref, self._me, call.token
        call.phase, call.ref, call.failure, call.retry = BACK, None, failure, False
        self.table.rearm(call, RETRY_WAIT)
        server, sink = call.server, call.sink
        call.work = gevent.spawn(wait_for_server, lambda: self.connection(server, sink)[0], dead,
                                 lambda: tell(me, ServerBack(token)))

    def server_back(self, token: int) -> None:
        call = self.table.current(token)
        if call is not None and call.phase == WAKING:  # its server started (or will not): sent now
            self._woken(call)
            return
        if call is None or call.phase != BACK:
            return  # cancelled (or expired) while it waited: never sent again
        call.work = None
        self.table.rearm(call, self._ctx.server_timeout(call.server) + DEADLINE_MARGIN)
        self.send(call)

    def expire(self, token: int) -> None:
        """The Session's deadline for call `token` passed: whatever it waited for, it is answered now."""
        call = self.table.current(token)
        if call is None or call.parked:
            return
        if call.phase == LOOKUP:  # the cache was too slow: the call goes on without it
            self.cache_answered(token, None)
            return
        if call.phase == SETTLING:  # start-up took longer than startup_wait: answer with what there is
            self.settled(token)
            return
        if call.phase == FORWARDED:
            waited = self._ctx.server_timeout(call.server) + DEADLINE_MARGIN
            tell(call.ref, CancelForward(self._me, token, "troupe's deadline passed"))
            outcome = UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"server {call.server} gave no answer within {waited:g}s",
                                    server=call.server)
            if call.span is not None:
                call.span.end(outcome)
        elif call.phase == WAKING:
            waited = self._ctx.server_timeout(call.server) + DEADLINE_MARGIN
            outcome = UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"server {call.server} (on demand) did not start and "
                                    f"answer within {waited:g}s", server=call.server)
        elif call.phase == BACK:
            failure = call.failure
            outcome = UpstreamError(failure.code, f"{failure.message} (and it was not back within {RETRY_WAIT:g}s)",
                                    failure.data, server=call.server)
        else:  # LOCAL: troupe's own work overran
            outcome = UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"troupe gave no answer to {call.method or 'the call'} "
                                    "in time", server="troupe")
        self.table.stop(token, "troupe's deadline passed")  # its work stopped; answered here, once
        self.ended(call, audit.TIMEOUT if outcome.code == jsonrpc.REQUEST_TIMEOUT else audit.ERROR, outcome.code)
        if call.sink is not None:
            try:
                answer = call.shape(call.rid, outcome)
            except Exception:
                answer = jsonrpc.error(call.rid, outcome.code, outcome.message)
            call.sink(answer)

    # ---------------------------------------------------------------- cancels and departures

    def cancel(self, rid, reason: str) -> None:
        """The client cancelled request `rid`: it gets no answer, its work stops (a forwarded call
        is cancelled upstream; a retry, lookup or wait is never sent), nothing is retried for it."""
        call = self.table.withdraw(rid, reason)
        if call is None:
            return
        if self._ctx.tracing is not None:  # no answer will pass its sink: its span ends here
            self._ctx.tracing.withdrawn(call.sink, reason)
        if call.phase == FORWARDED and call.ref is not None:
            tell(call.ref, CancelForward(self._me, call.token, reason))
        self.ended(call, audit.CANCELLED)
        withdrawn(call)

    def cancel_all(self, reason: str) -> None:
        """The client is gone: every call withdrawn, each Connection told once."""
        refs = set()
        for call in self.table.close(reason):
            if self._ctx.tracing is not None:
                self._ctx.tracing.withdrawn(call.sink, reason)
            self.ended(call, audit.CANCELLED)
            if call.phase == FORWARDED and call.ref is not None:
                if call.ref is self._ctx.tasks:  # each by its token: a task whose handle never reached
                    tell(call.ref, CancelForward(self._me, call.token, reason))  # the client is cancelled
                refs.add(call.ref)
        for ref in refs:
            tell(ref, CancelForward(self._me, None, reason))

    def fail_all(self, why: str) -> None:
        """The Session failed: every call it holds is answered now (its client is still there and
        waits), and cancelled upstream."""
        for call in self.table.close(why):
            self.ended(call, audit.ERROR, jsonrpc.INTERNAL_ERROR)
            if call.sink is not None:
                _deliver(call.sink, jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR, why))
            if call.phase == FORWARDED and call.ref is not None:
                tell(call.ref, CancelForward(self._me, call.token, why))


def relayed_log_level(sink) -> str | None:
    """The logLevel a modern request asked for goes upstream with it (None: the connection's own)."""
    envelope = modern.envelope_of(sink)
    return envelope.log_level if envelope is not None else None


def _deliver(sink, message: dict) -> None:
    try:
        sink(message)
    except Exception:  # a front that cannot take an answer must not stop the others from theirs
        logger.exception("an answer could not be delivered")
