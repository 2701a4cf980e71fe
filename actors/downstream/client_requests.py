"""Requests upstream servers send to one client through troupe (sampling, elicitation, roots):
the ids troupe gives them, the client's answers routed back to the asking connection, each
answered at most once from here, whether by the client, a deadline or the client leaving.

Used only from its Session's greenlet; the Session stays the only writer. The asking
Connection owns the real deadline (and answers its server once); the deadline here is the
Session's net so that a request the client never answers is not kept for ever."""
from __future__ import annotations

import itertools
from typing import Any, Callable

import gevent
from loguru import logger

from actors.messages import ServerRequest, UpstreamError
from actors.protocol import jsonrpc, mcp
from actors.upstream.server_messages import CLIENT_ANSWER_TIMEOUT

# The client capability each relayed server→client request needs.
NEEDS = mcp.RELAYED_REQUESTS
# A little after the Connection's own timeout, which answers its server first; this one only
# clears the Session's table of a request the client never answered.
ANSWER_DEADLINE = CLIENT_ANSWER_TIMEOUT + 5.0


def labelled(server: str, method: str, params: dict) -> dict:
    """An elicitation's message says which server asks (the person answering must know)."""
    if method == "elicitation/create" and isinstance(params.get("message"), str):
        return {**params, "message": f"[{server}] {params['message']}"}
    return dict(params)


class AnswerOverdue:
    """Told by a Session's timer to the Session itself: request `our_id` got no answer in time."""

    __slots__ = ("our_id",)

    def __init__(self, our_id: str) -> None:
        self.our_id = our_id


class _Open:
    """One request sent to the client, still waiting for its answer."""

    __slots__ = ("request", "timer")

    def __init__(self, request: ServerRequest, timer: gevent.Greenlet | None) -> None:
        self.request, self.timer = request, timer


class ClientRequests:
    """The table of requests relayed to one client: our id → the upstream request it stands for.

    `on_deadline(our_id)` runs in a timer greenlet `deadline` seconds after a request is sent;
    the Session passes a tell to its own mailbox, then calls `expire` from its own greenlet.
    """

    def __init__(self, on_deadline: Callable[[str], Any] | None = None, deadline: float = ANSWER_DEADLINE,
                 prefix: str = "troupe-") -> None:
        self._on_deadline = on_deadline
        self._deadline = deadline
        self._prefix = prefix
        self._ids = itertools.count(1)
        self._open: dict[str, _Open] = {}

    def __len__(self) -> int:
        return len(self._open)

    def send(self, req: ServerRequest, client_caps: dict, sink: Callable[[Any], Any] | None) -> str | None:
        """Send `req` to the client through `sink` under a new id, or refuse it at once.

        Refused (answered with an error, None returned) when the client lacks the capability
        the method needs or there is no stream to reach it on.
        """
        need = NEEDS.get(req.method)
        if need not in client_caps:
            # troupe declares every capability it relays to every upstream (mcp.relayed_client_capabilities):
            # a client without this one is not asked, and the server hears why
            why = (f"troupe refuses {req.method}: the client whose call triggered it did not declare "
                   f"the {need} capability")
            logger.bind(server=req.server).info("refused the server's {}: the client did not declare {}",
                                                req.method, need)
            req.on_reply(UpstreamError(jsonrpc.METHOD_NOT_FOUND, why, server=req.server))
            return None
        if sink is None:
            req.on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, "no open stream to the client"))
            return None
        our_id = f"{self._prefix}{next(self._ids)}"
        timer = gevent.spawn_later(self._deadline, self._on_deadline, our_id) if self._on_deadline else None
        # recorded before it is sent: a sink may hand the answer back before it returns
        self._open[our_id] = _Open(req, timer)
        sink(jsonrpc.request(our_id, req.method, labelled(req.server, req.method, req.params)))
        return our_id

    def answer(self, msg: dict) -> bool:
        """The client's response: route it to the asking connection; False if no request has its id."""
        rid = msg.get("id")
        entry = self._open.pop(rid, None) if isinstance(rid, str) else None  # troupe's ids are strings
        if entry is None:
            return False
        _kill(entry.timer)
        req, error = entry.request, msg.get("error")
        if isinstance(error, dict):
            req.on_reply(UpstreamError(error.get("code", jsonrpc.INTERNAL_ERROR), str(error.get("message", "")),
                                       error.get("data"), server=req.server))
        else:
            result = msg.get("result")
            req.on_reply(result if isinstance(result, dict) else {})
        return True

    def cancelled(self, server: str, upstream_id: Any) -> list[str]:
        """The server withdrew its request: forget it unanswered; returns the ids the client should
        hear notifications/cancelled for."""
        gone = [our_id for our_id, entry in self._open.items()
                if entry.request.server == server and entry.request.upstream_id == upstream_id]
        for our_id in gone:
            _kill(self._open.pop(our_id).timer)
        return gone

    def expire(self, our_id: str) -> bool:
        """The deadline of `our_id` passed: answer it with a timeout; False if it was answered already."""
        entry = self._open.pop(our_id, None)
        if entry is None:
            return False
        entry.request.on_reply(UpstreamError(
            jsonrpc.REQUEST_TIMEOUT, f"the client gave no answer to {entry.request.method} within {self._deadline:g}s",
            server=entry.request.server))
        return True

    def close(self, reason: str = "the client went away") -> None:
        """The client is gone: every open request is answered with an error, so no upstream waits."""
        entries, self._open = list(self._open.values()), {}
        for entry in entries:
            _kill(entry.timer)
            entry.request.on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, reason, server=entry.request.server))


def _kill(timer: gevent.Greenlet | None) -> None:
    if timer is not None:
        timer.kill(block=False)
