"""What an upstream server sends a Connection unasked: its requests (ping answered here, sampling,
elicitation and roots relayed to the client whose call asked, or refused: RequestTable.asker) and its notifications
(progress, list_changed, log lines, resource updates, cancellation of its own requests)."""
from __future__ import annotations

from typing import Any, Callable

import gevent
from loguru import logger

from actors.events.kinds import ResourceUpdated, ServerListChanged, ServerLogged
from actors.messages import ServerRequest, ServerRequestCancelled, UpstreamError
from actors.protocol import jsonrpc, mcp
from actors.tells import tell
from actors.upstream.requests import RequestTable, usable_id

CLIENT_ANSWER_TIMEOUT = 300.0  # a relayed sampling/elicitation request waits this long for a person
# Server→client requests troupe relays, and the client capability each needs.
RELAYED = mcp.RELAYED_REQUESTS


def related_task(params) -> str | None:
    """The task a 2025-11-25 server's request says it belongs to (`_meta` related-task), if a string."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    related = meta.get(mcp.RELATED_TASK) if isinstance(meta, dict) else None
    task = related.get("taskId") if isinstance(related, dict) else None
    return task if isinstance(task, str) else None


class ServerMessages:
    """Owns the server's requests relayed to clients and not yet answered (each with a timer).

    A plain object used only from its Connection's greenlet. A client's answer and the timer's
    run elsewhere: both only call `answer_later(upstream id, outcome)`, which the Connection turns
    into an AnswerServer to itself, handed back here through `answer`.
    """

    def __init__(self, server: str, requests: RequestTable, send: Callable[[dict], None], *,
                 route, bus, answer_later: Callable[[Any, Any], None],
                 on_list_changed: Callable[[tuple], None], log=logger) -> None:
        self.server = server
        self._requests = requests  # the Connection's: progress tokens and who is calling
        self._send = send
        self._route = route  # how a request finds the session whose call triggered it (None: refuse)
        self._bus = bus
        self._answer_later = answer_later
        self._on_list_changed = on_list_changed
        self._log = log
        self._relayed: dict[Any, tuple] = {}  # upstream request id → (timer, session ref, on_reply)

    def request(self, msg: dict, related=None) -> None:
        """A request from the server: answered at once, refused, or relayed to the client whose
        call it belongs to (`related`: the id of troupe's request whose stream carried it)."""
        method, uid = msg["method"], msg["id"]
        if method == "ping":
            self._send(jsonrpc.result(uid, {}))
            return
        router = self._route
        if method not in RELAYED or router is None:
            self._send(jsonrpc.error(uid, jsonrpc.METHOD_NOT_FOUND, f"troupe does not relay {method}"))
            return
        asker = self._requests.asker(related, related_task(msg.get("params")))
        owner = getattr(router, "owner", None)  # a client's own upstream (share: per_client) asks only it
        if owner is not None and isinstance(asker, tuple) and \
                getattr(asker[0], "actor_urn", asker[0]) != getattr(owner, "actor_urn", owner):
            # a call on the client's own upstream that its Session does not hold: the task the
            # TaskKeeper runs for that client, whose question the keeper keeps
            origin, origin_request = asker
            router = router.route
        elif owner is not None:
            origin, origin_request = owner, asker[1] if isinstance(asker, tuple) else None
        elif isinstance(asker, str):  # nobody's, or troupe cannot tell whose: nobody is asked
            self._log.info("refused the server's {}: {}", method, asker)
            self._send(jsonrpc.error(uid, jsonrpc.INVALID_REQUEST, f"troupe refuses {method}: {asker}"))
            return
        else:
            origin, origin_request = asker
        answer_later = self._answer_later

        def on_reply(outcome) -> None:  # runs in the session's greenlet
            answer_later(uid, outcome)
        timer = gevent.spawn_later(CLIENT_ANSWER_TIMEOUT, on_reply, UpstreamError(
            jsonrpc.REQUEST_TIMEOUT, f"no client answered {method} within {CLIENT_ANSWER_TIMEOUT:g}s"))
        params = msg.get("params")
        params = params if isinstance(params, dict) else {}
        session = router(ServerRequest(self.server, uid, method, params, on_reply, origin_request), origin)
        self._relayed[uid] = (timer, session, on_reply)

    def answer(self, uid, outcome) -> None:
        """A client answered a relayed request (or its timer did): to the server, once."""
        entry = self._relayed.pop(uid, None)
        if entry is None:
            return  # answered already (timeout or cancel): one answer only
        entry[0].kill(block=False)
        if isinstance(outcome, UpstreamError):
            self._send(jsonrpc.error(uid, outcome.code, outcome.message, outcome.data))
        else:
            self._send(jsonrpc.result(uid, outcome))

    def notification(self, msg: dict) -> None:
        method, params = msg["method"], msg.get("params") or {}
        if not isinstance(params, dict):
            params = {}
        if method == "notifications/progress":
            pending = self._requests.get(params.get("progressToken"))
            if pending is not None and pending.on_progress is not None:
                pending.on_progress(params)
        elif method in mcp.LIST_CHANGED:
            self._on_list_changed(mcp.LIST_CHANGED[method])  # the lists call lists_stale, coalesced
        elif method == "notifications/message":
            if self._bus is not None:
                self._bus.publish(ServerLogged(self.server, str(params.get("level") or "info"),
                                               params.get("logger"), params.get("data")))
        elif method == "notifications/resources/updated":
            if self._bus is not None and isinstance(params.get("uri"), str):
                self._bus.publish(ResourceUpdated(self.server, params["uri"]))
        elif method == "notifications/cancelled":
            uid = params.get("requestId")
            entry = self._relayed.pop(uid, None) if usable_id(uid) else None
            if entry is not None:  # the server gave up on its own request to a client
                entry[0].kill(block=False)
                if entry[1] is not None:  # a Session gone meanwhile has nothing left to withdraw
                    tell(entry[1], ServerRequestCancelled(self.server, params.get("requestId"), entry[2]))
        else:
            self._log.debug("unhandled notification {}", method)

    def lists_stale(self, kinds: tuple) -> None:
        """The server announced a change of these lists (told by its UpstreamLists, at most once
        per coalesced re-read): answers cached from this server may be stale now (actors/caching)."""
        if self._bus is not None:
            self._bus.publish(ServerListChanged(self.server, frozenset(kinds)))

    def clear(self) -> None:
        """The link is gone: relayed requests are forgotten (a late client answer finds nothing)."""
        relayed, self._relayed = self._relayed, {}
        for timer, _session, _on_reply in relayed.values():
            timer.kill(block=False)
