"""Server→client requests across the eras: MRTR (2026-07-28) rounds on one side, real requests on
the other. A modern server never sends a request; it answers `input_required` with
`inputRequests` and a `requestState`, and the client retries with a new id, the same params,
`inputResponses` and the state. A legacy server sends real requests in the middle of a call.

    client  upstream   troupe
    legacy  legacy     relays the request (client_requests), as before
    modern  modern     passes input_required through, the upstream's state sealed in troupe's
    legacy  modern     asks the client each input request for real, then retries upstream
    modern  legacy     parks the upstream call with its pending request, answers input_required
                       with sealed state naming it; the retry answers the request and resumes

Every state troupe hands out is sealed (protocol/request_state): it names the server, the caller
and the arguments, so a retry cannot be pointed at another server, another caller's parked call
or other arguments. Parked calls are bounded in number (MAX_PARKED) and time (PARK_TTL_S).
"""
from __future__ import annotations

import itertools
import secrets
from typing import TYPE_CHECKING, Any

import gevent

from actors.downstream.client_requests import labelled
from actors.downstream.calls import Call, CallTable
from actors.downstream.forwarder import relayed_log_level
from actors.messages import CancelForward, Forward, ForwardReplied, ServerRequest, UpstreamError
from actors.ops import records as audit
from actors.protocol import jsonrpc, modern
from actors.protocol.request_state import args_digest
from actors.tells import tell as _tell

if TYPE_CHECKING:
    from actors.downstream.client_requests import ClientRequests
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.forwarder import Forwarder
    from actors.downstream.lifecycle import Handshake

MAX_ROUNDS = 8  # input_required rounds one call may take before troupe gives up on it
MAX_PARKED = 64  # calls one Session holds for modern clients that have yet to retry
PARK_TTL_S = 300.0  # a person answering an elicitation gets this long before the call is dropped
STATE_TTL_S = PARK_TTL_S  # a passed-through state is good for as long
ROUND_KEYS = ("inputResponses", "requestState")


class InputAnswered:
    """Told by a ServerRequest's on_reply to its Session: the client answered input request `key`
    of round `round_no` of call `token` (a legacy client, asked for a modern upstream)."""

    __slots__ = ("token", "round_no", "key", "outcome")

    def __init__(self, token: int, round_no: int, key: str, outcome) -> None:
        self.token, self.round_no, self.key, self.outcome = token, round_no, key, outcome


class ParkExpired:
    """Told by a parked call's timer to its Session: nobody retried it within PARK_TTL_S."""

    __slots__ = ("token", "nonce")

    def __init__(self, token: int, nonce: str) -> None:
        self.token, self.nonce = token, nonce


class InputRetry:
    """A modern retry's round keys: the opened requestState payload (None when the retry has none)
    and the inputResponses."""

    __slots__ = ("state", "responses")

    def __init__(self, state: dict | None, responses: dict) -> None:
        self.state, self.responses = state, responses


class Rounds:
    """The input exchange of one call (held by its Call; the Session's greenlet alone touches it).

    Bridging (legacy client): `asked` are the keys of this round still unanswered, `answers`
    what the client said, `upstream_state` the server's requestState to send back.
    Parking (modern client): `waiting` are the server's own requests awaiting the client's
    retry, `outcome` the call's answer if it came while parked, `nonce` names this parking."""

    __slots__ = ("count", "asked", "answers", "upstream_state", "waiting", "outcome", "nonce", "timer", "keys")

    def __init__(self) -> None:
        self.count = 0
        self.asked: set[str] = set()
        self.answers: dict[str, Any] = {}
        self.upstream_state: Any = None
        self.waiting: dict[str, ServerRequest] = {}
        self.outcome: Any = None
        self.nonce = ""
        self.timer: gevent.Greenlet | None = None
        self.keys = itertools.count(1)


class InputRounds:
    """The four bridges of the table above, for one Session's calls. No state of its own: each
    call's rounds live on its Call in the Session's CallTable. A plain object used only from its
    Session's greenlet, with explicit inputs: the context (the sealer, timeouts), the Session's
    ref and key, its table, the requests relayed to its client, its client's handshake state and
    view, and its Forwarder (answers, settles and connections)."""

    def __init__(self, ctx: SessionContext, me, key: str, table: CallTable, client_requests: ClientRequests,
                 handshake: Handshake, view: ClientView, forwarder: Forwarder) -> None:
        self._ctx, self._me, self._key, self._table = ctx, me, key, table
        self._client_requests, self._handshake, self._view, self._fw = client_requests, handshake, view, forwarder

    # ---------------------------------------------------------------- a modern retry arrives

    def input_retry(self, rid, method: str, params: dict, principal: str) -> tuple[dict, Any] | dict:
        """(params without the round keys, InputRetry or None); or the error answer for a retry
        whose state troupe cannot accept."""
        if method == "tasks/update" or not any(k in params for k in ROUND_KEYS):
            return params, None  # (a task's inputResponses answer the task, not a round of this request)
        clean = {k: v for k, v in params.items() if k not in ROUND_KEYS}
        state, responses = params.get("requestState"), params.get("inputResponses", {})
        if not isinstance(responses, dict):
            return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "inputResponses must be an object")
        if state is None:
            # Answers without a state: the server that asked kept no state, and it alone can tell
            # whether they answer anything (it re-asks if not). Nothing of troupe's is at stake.
            return clean, InputRetry(None, responses)
        opened = self._ctx.sealer.open(state)
        if isinstance(opened, str):
            return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, opened)
        if opened.get("p") != principal or opened.get("d") != args_digest(method, params):
            return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "requestState belongs to another request: "
                                 "a retry repeats the method and params of the request it answers")
        return clean, InputRetry(opened, responses)

    def continue_round(self, rid, server: str, method: str, params: dict, sink, shape) -> dict | None:
        """The params to forward for a retry, or None once handled here (a parked call resumed,
        or the retry refused)."""
        retry: InputRetry = sink.retry
        state = retry.state
        if state is None:
            return {**params, "inputResponses": retry.responses}
        if state.get("s") != server:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "requestState was issued for another server"))
            return None
        if state.get("k") == "u":  # a modern upstream's own round: its state back, unsealed
            out = {**params, "inputResponses": retry.responses}
            if state.get("u") is not None:
                out["requestState"] = state["u"]
            return out
        call = self._table.current(state.get("t"))
        rounds = call.rounds if call is not None else None
        if call is None or not call.parked or rounds is None or rounds.nonce != state.get("n") \
                or state.get("sk") != self._key or call.method != method:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "that call is no longer waiting for input (it ended, "
                               "expired or troupe restarted): send the request again without requestState"))
            return None
        self._resume(call, rid, sink, shape, retry.responses)
        return None

    # ---------------------------------------------------------------- an upstream asks for input

    def input_required(self, call: Call, outcome: dict) -> None:
        """A modern upstream answered `call` with input_required."""
        if modern.envelope_of(call.sink) is not None:
            self._pass_through(call, outcome)
        else:
            self._bridge_round(call, outcome)

    def _pass_through(self, call: Call, outcome: dict) -> None:
        """Modern client: the rounds are its own; troupe seals the upstream's state with its server."""
        sink = call.sink
        state = self._ctx.sealer.seal({"k": "u", "s": call.server, "u": outcome.get("requestState"),
                                     "p": sink.principal, "d": sink.digest}, STATE_TTL_S)
        requests = outcome.get("inputRequests")
        if isinstance(requests, dict):
            requests = {k: {**r, "params": labelled(call.server, str(r.get("method")), r.get("params") or {})}
                        if isinstance(r, dict) else r for k, r in requests.items()}
        result = {**outcome, "requestState": state}
        if requests is not None:
            result["inputRequests"] = requests
        self._fw.answer(call.token, jsonrpc.result(call.rid, result), shaped=True)

    def _bridge_round(self, call: Call, outcome: dict) -> None:
        """Legacy client: each input request becomes a real request to it; the answers go back
        upstream in a retry, up to MAX_ROUNDS times."""
        rounds = call.rounds = call.rounds or Rounds()
        rounds.count += 1
        requests = outcome.get("inputRequests") or {}
        bad = not isinstance(requests, dict) or not all(
            isinstance(r, dict) and isinstance(r.get("method"), str) for r in requests.values())
        if bad or rounds.count > MAX_ROUNDS:
            why = "malformed inputRequests" if bad else f"input asked {MAX_ROUNDS} times in one call"
            self._fw.settle(call.token, UpstreamError(jsonrpc.INTERNAL_ERROR, f"server {call.server}: {why}",
                                                   server=call.server))
            return
        rounds.upstream_state, rounds.answers, rounds.asked = outcome.get("requestState"), {}, set(requests)
        if not requests:
            self._retry_upstream(call)
            return
        me, token, round_no = self._me, call.token, rounds.count
        for key, request in requests.items():
            params = request.get("params")

            def on_reply(answer, key=key) -> None:  # the Session's greenlet (ClientRequests): only a tell
                _tell(me, InputAnswered(token, round_no, key, answer))
            req = ServerRequest(call.server, (token, key), request["method"], params if isinstance(params, dict)
                                else {}, on_reply, origin_request=token)
            self._client_requests.send(req, self._handshake.client_caps, call.sink)

    def input_answered(self, msg: InputAnswered) -> None:
        call = self._table.current(msg.token)
        rounds = call.rounds if call is not None else None
        if call is None or rounds is None or rounds.count != msg.round_no or msg.key not in rounds.asked:
            return  # the call ended, or this round is over: one answer only
        if isinstance(msg.outcome, UpstreamError):
            self._fw.settle(call.token, UpstreamError(msg.outcome.code, f"server {call.server} asked the client for "
                                                   f"input, which failed: {msg.outcome.message}", server=call.server))
            return
        rounds.asked.discard(msg.key)
        rounds.answers[msg.key] = msg.outcome
        if not rounds.asked:
            self._retry_upstream(call)

    def _retry_upstream(self, call: Call) -> None:
        rounds = call.rounds
        assert rounds is not None  # only a call in a round is retried
        params = {k: v for k, v in call.params.items() if k not in ROUND_KEYS}
        params["inputResponses"] = rounds.answers
        if rounds.upstream_state is not None:
            params["requestState"] = rounds.upstream_state
        ref, status = self._fw.connection(call.server, call.sink)  # per_client: its own upstream
        me, token = self._me, call.token

        def on_reply(outcome) -> None:  # the connection's greenlet: a tell, nothing else
            _tell(me, ForwardReplied(token, outcome))
        # the next round goes out as the first did: the client's capabilities and log level with it
        if ref is None or not _tell(ref, Forward(call.method, params, on_reply, origin=me, origin_request=token,
                                                 client_capabilities=self._fw.relayed_capabilities(call.sink),
                                                 log_level=relayed_log_level(call.sink),
                                                 client=self._view.client_name)):
            why = status or f"server {call.server} went away"
            self._fw.settle(token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, why, server=call.server))
            return
        call.ref = ref

    # ---------------------------------------------------------------- a legacy upstream asks a modern client

    def park(self, call: Call, req: ServerRequest) -> None:
        """Hold the server's request for the client's retry; answer the client input_required
        now unless its call is parked already (then the retry hears of this one too)."""
        rounds = call.rounds = call.rounds or Rounds()
        if not call.parked and self._table.parked_count() >= MAX_PARKED:
            req.on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, f"troupe holds {MAX_PARKED} calls waiting for "
                                       "their clients' input already; try again later", server=req.server))
            return
        rounds.waiting[f"{req.server}-{next(rounds.keys)}"] = req
        if not call.parked:
            self._ask_and_park(call)

    def _ask_and_park(self, call: Call) -> None:
        rounds = call.rounds
        assert rounds is not None and call.sink is not None  # a call with a waiting client and requests
        sink = call.sink
        rounds.nonce = secrets.token_hex(8)
        state = self._ctx.sealer.seal({"k": "p", "t": call.token, "n": rounds.nonce, "sk": self._key, "s": call.server,
                                     "p": sink.principal, "d": sink.digest}, PARK_TTL_S)
        asked = {key: {"method": r.method, "params": labelled(r.server, r.method, r.params)}
                 for key, r in rounds.waiting.items()}
        sink(jsonrpc.result(call.rid, {"resultType": "input_required", "inputRequests": asked,
                                       "requestState": state}))
        self._table.park(call)
        me, token, nonce = self._me, call.token, rounds.nonce
        rounds.timer = gevent.spawn_later(PARK_TTL_S, lambda: _tell(me, ParkExpired(token, nonce)))

    def _resume(self, call: Call, rid, sink, shape, responses: dict) -> None:
        """The retry of a parked call: the answers go to the server's requests, and this request
        awaits what comes next (the result, or another round)."""
        rounds = call.rounds
        assert rounds is not None
        _kill(rounds.timer)
        for key in [k for k in rounds.waiting if isinstance(responses.get(k), dict)]:
            rounds.waiting.pop(key).on_reply(responses[key])
        self._table.attach(call, rid, sink, shape, self._ctx.server_timeout(call.server) + PARK_MARGIN_S)
        if rounds.outcome is not None:  # it ended while its client was away
            outcome, rounds.outcome = rounds.outcome, None
            self._fw.settle(call.token, outcome)
        elif rounds.waiting:  # not every request was answered: ask for the rest again
            self._ask_and_park(call)

    def park_expired(self, msg: ParkExpired) -> None:
        call = self._table.current(msg.token)
        if call is None or not call.parked or call.rounds is None or call.rounds.nonce != msg.nonce:
            return
        self._drop_parked(call, f"the client did not retry within {PARK_TTL_S:g}s")

    def _drop_parked(self, call: Call, reason: str) -> None:
        """A parked call nobody will resume: its server hears no to each request, and the call is cancelled."""
        rounds = call.rounds
        assert rounds is not None
        _kill(rounds.timer)
        waiting, rounds.waiting = list(rounds.waiting.values()), {}
        for req in waiting:
            req.on_reply(UpstreamError(jsonrpc.REQUEST_TIMEOUT, reason, server=req.server))
        self._table.settle(call.token)
        self._fw.ended(call, audit.TIMEOUT, jsonrpc.REQUEST_TIMEOUT)
        if rounds.outcome is None:
            _tell(call.ref, CancelForward(self._me, call.token, reason))

    def release(self, reason: str) -> None:
        """The Session is going: no server keeps waiting on a request only a parked call held."""
        for call in self._table.calls():
            if call.rounds is not None and call.rounds.waiting:
                _kill(call.rounds.timer)
                waiting, call.rounds.waiting = list(call.rounds.waiting.values()), {}
                for req in waiting:
                    req.on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, reason, server=req.server))


PARK_MARGIN_S = 5.0  # a resumed call's deadline: its server's timeout and this


def _kill(timer) -> None:
    if timer is not None:
        timer.kill(block=False)
