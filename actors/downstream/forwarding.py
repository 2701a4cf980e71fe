"""Forwarding helpers for sessions: the retry of an idempotent request after a
reconnect, and progress relayed under the client's own token."""
from __future__ import annotations

import gevent
import pykka

from actors.protocol import jsonrpc

IDEMPOTENT_METHODS = frozenset({"resources/read", "prompts/get", "completion/complete"})
RETRY_WAIT = 15.0  # how long an idempotent request waits for its server to come back


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
