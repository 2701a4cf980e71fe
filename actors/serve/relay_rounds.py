"""A server's questions across the relay. The owner runs the server; the client that asked for
the call sits on another instance. A legacy server asks its client (sampling, elicitation, roots)
in the middle of a call, but the relay speaks the modern era, which has no server→client requests.
So the owner parks the call and answers it `input_required`, with the server's requests and a
sealed requestState naming the parked call; the calling instance asks its own client (for real,
or as a round of its own), then retries with inputResponses; the retry answers the server's
requests and waits on for the call's answer, or for the next round.

A RelayCall is the origin the owner's Connection routes the server's requests to: its `tell`
only puts them on the call's queue, which the handler greenlet of the current HTTP request reads.
"""
from __future__ import annotations

import itertools
import secrets
from typing import Any

import gevent
import gevent.queue

from actors.downstream.client_requests import NEEDS
from actors.messages import CancelForward, ServerRequest, ServerRequestCancelled, UpstreamError
from actors.protocol import jsonrpc, modern
from actors.protocol import request_state
from actors.protocol.request_state import args_digest
from actors.tells import tell

MAX_PARKED = 64  # relayed calls waiting for their caller's retry, per instance
PARK_TTL_S = 300.0  # as long as a Session waits for a modern client's retry
_tokens = itertools.count(1)


class Answered:
    """On a RelayCall's queue: the Connection's outcome for the call (result dict or UpstreamError)."""

    __slots__ = ("outcome",)

    def __init__(self, outcome) -> None:
        self.outcome = outcome


class RelayCall:
    """One relayed call at the owner, from its Forward to its answer, across any number of HTTP
    requests (the first and each retry). Only the handler greenlet of the current request reads
    its queue and changes it; the Connection reaches it through `tell`, `on_reply` and `on_progress`."""

    def __init__(self, ref, server: str, rid, method: str, params: dict, caps: Any) -> None:
        self.ref, self.server, self.rid, self.method = ref, server, rid, method
        self.caps = caps if isinstance(caps, dict) else None  # None: not a modern caller's call
        self.queue: gevent.queue.SimpleQueue = gevent.queue.SimpleQueue()
        self.token = next(_tokens)
        self.digest = args_digest(method, params)
        self.progress_token = (params.get("_meta") or {}).get("progressToken")
        self.waiting: dict[str, ServerRequest] = {}
        self.keys = itertools.count(1)
        self.nonce = ""
        self.timer: gevent.Greenlet | None = None

    # ---------------------------------------------------------------- from the Connection

    def tell(self, message) -> None:
        """The Connection routes the server's requests (and their cancellation) here."""
        self.queue.put(message)

    def on_reply(self, outcome) -> None:
        self.queue.put(Answered(outcome))

    def on_progress(self, params: dict) -> None:
        if self.progress_token is None:
            return  # the request that is waiting now asked for none
        out = {"progressToken": self.progress_token, "progress": params.get("progress", 0)}
        out.update({k: params[k] for k in ("total", "message") if k in params})
        self.queue.put(jsonrpc.notification("notifications/progress", out))

    # ---------------------------------------------------------------- in the handler greenlet

    def abandon(self, reason: str) -> None:
        """The call ends unanswered (its caller left, or time ran out): the server hears no to each
        request it is waiting on, at once, and the call is cancelled upstream."""
        waiting, self.waiting = list(self.waiting.values()), {}
        for req in waiting:
            req.on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, reason, server=req.server))
        tell(self.ref, CancelForward(self, self.token, reason))

    def take(self, item) -> Answered | None:
        """Read one queue item: the answer; None when the call waits on (a progress notice, a
        server request now held in `waiting` or refused, a cancelled one dropped)."""
        if isinstance(item, Answered):
            return item
        if isinstance(item, ServerRequest):
            need = NEEDS.get(item.method)
            if self.caps is not None and need is not None and need not in self.caps:
                item.on_reply(UpstreamError(modern.MISSING_CAPABILITY, f"the client did not declare {need}",
                                            {"requiredCapabilities": {need: {}}}, server=item.server))
            else:
                self.waiting[f"{item.server}-{next(self.keys)}"] = item
        elif isinstance(item, ServerRequestCancelled):
            for key in [k for k, r in self.waiting.items() if r.upstream_id == item.upstream_id]:
                del self.waiting[key]
        return None


class RelayRounds:
    """The owner's parked relayed calls, by token: each waits for its caller's retry, bounded in
    number and in time. Touched only by relay handler greenlets, one turn at a time."""

    def __init__(self, sealer) -> None:
        self.sealer = sealer
        self.parked: dict[int, RelayCall] = {}

    def park(self, call: RelayCall) -> dict:
        """The input_required result that answers the current request of `call`."""
        if len(self.parked) >= MAX_PARKED:
            self.drop(call, f"troupe holds {MAX_PARKED} relayed calls waiting for input already")
            return jsonrpc.error(call.rid, jsonrpc.INTERNAL_ERROR, "too many calls waiting for input; retry later")
        call.nonce = secrets.token_hex(8)
        state = self.sealer.seal({"k": "r", "t": call.token, "n": call.nonce, "s": call.server, "d": call.digest},
                                 PARK_TTL_S)
        asked = {key: {"method": r.method, "params": r.params} for key, r in call.waiting.items()}
        self.parked[call.token] = call
        nonce = call.nonce
        call.timer = gevent.spawn_later(PARK_TTL_S, self._expire, call, nonce)
        return jsonrpc.result(call.rid, {"resultType": "input_required", "inputRequests": asked,
                                         "requestState": state})

    def names_parked(self, params: dict) -> bool:
        """True for a retry whose requestState this cluster sealed for a parked relayed call; any
        other state (a modern server's own, or that of a troupe upstream of this one, sealed under
        another key) goes to the server with the retry."""
        state = params.get("requestState")
        if not isinstance(state, str) or not state.startswith(request_state.PREFIX):
            return False
        opened = self.sealer.open(state)
        if isinstance(opened, dict):
            return opened.get("k") == "r"
        return "expired" in opened  # its seal holds, so it is ours, but too old: resume() says so

    def resume(self, server: str, rid, method: str, params: dict) -> RelayCall | dict:
        """The parked call a retry names, its answers given to the server; or the error answer."""
        opened = self.sealer.open(params.get("requestState"))
        if isinstance(opened, str):
            return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, opened)
        call = self.parked.get(opened.get("t"))  # type: ignore[arg-type]
        if opened.get("k") != "r" or opened.get("s") != server or opened.get("d") != args_digest(method, params) \
                or call is None or call.nonce != opened.get("n"):
            return jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "that call is no longer waiting for input (it ended, "
                                 "expired or its owner restarted): send the request again without requestState")
        del self.parked[call.token]
        if call.timer is not None:
            call.timer.kill(block=False)
        responses = params.get("inputResponses")
        responses = responses if isinstance(responses, dict) else {}
        for key in [k for k in call.waiting if isinstance(responses.get(k), dict)]:
            call.waiting.pop(key).on_reply(responses[key])
        call.rid = rid
        call.progress_token = (params.get("_meta") or {}).get("progressToken")
        return call

    def drop(self, call: RelayCall, reason: str) -> None:
        """Nobody will answer: the server hears no to each request, and the call is cancelled."""
        self.parked.pop(call.token, None)
        call.abandon(reason)

    def _expire(self, call: RelayCall, nonce: str) -> None:
        if self.parked.get(call.token) is call and call.nonce == nonce:
            self.drop(call, f"the calling instance did not retry within {PARK_TTL_S:g}s")
