"""The owner's side of a call between instances: POST /mcp with X-Troupe-Relay names a `single`
server this instance runs, and the request goes straight to that server's Connection.

It is ordinary modern MCP (the caller's Connection speaks 2026-07-28 to it, envelope and all),
with three differences from a client's request: it must carry the cluster secret (compared in
constant time), it reaches one server's own names and lists (no catalogue, no prefix), and it is
never passed on: a server this instance does not own is refused with 503 (the loop guard; the
caller's lease keeper learns the new owner within a third of a lease), marked NOT_RUN so that the
caller's failover front sends it on to the new owner. While this instance starts a server it has
just taken over, the server's front holds its calls instead. Closing the response
cancels the call upstream, as on the client front. Answers are JSON, except a call asking for
progress and a `subscriptions/listen`, which are streamed (see relay_streams). A server that asks
its client something in the middle of a call makes it an input round (see relay_rounds).
"""
from __future__ import annotations

import hmac
import time
from functools import partial
from typing import Any

import gevent.queue
import orjson

from actors.cluster.failover import NOT_RUN
from actors.messages import Forward, UpstreamError
from actors.protocol import inbound, jsonrpc, mcp, modern
from actors.serve import sse_framing as sse
from actors.serve.listener import watch_hangup
from actors.serve.relay_rounds import RelayCall, RelayRounds
from actors.serve.relay_streams import RelayListen, answer, progress_frames
from actors.supervision.placing import CLIENT_HEADER, RELAY_HEADER, TOKEN_HEADER
from actors.tells import tell

RELAY_LIST_TTL_MS = 5_000  # lists read through a relay are re-read this often if its listen stream is down
DEADLINE_MARGIN_S = 5.0
QUICK_S = 0.05

Response = tuple[str, list, Any]


def _header(environ, name: str) -> str | None:
    return environ.get("HTTP_" + name.upper().replace("-", "_"))


def _json(status: str, body) -> Response:
    return status, [("Content-Type", "application/json")], orjson.dumps(body)


def is_relay(environ) -> bool:
    return _header(environ, RELAY_HEADER) is not None


class Relay:
    """Answers relayed requests for the servers this instance owns. Each waits for its one answer
    in its own handler greenlet; only a call whose server asked its client something outlives its
    request, parked in `rounds` until the caller's retry."""

    def __init__(self, runtime) -> None:
        self.rt = runtime
        self.rounds = RelayRounds(runtime.sealer)

    def post(self, environ, body: bytes) -> Response:
        member = self.rt.cluster
        token = member.token if member is not None else None
        if member is None or token is None:
            return _json("503 Service Unavailable", jsonrpc.error(None, jsonrpc.SERVER_UNAVAILABLE,
                                                                  "this instance has not joined its cluster", NOT_RUN))
        if not hmac.compare_digest((_header(environ, TOKEN_HEADER) or "").encode(), token.encode()):
            return _json("403 Forbidden", jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "not a member of this cluster"))
        checked = inbound.parse(body, "cluster relay")  # checked where it entered the cluster, and again here
        msg = checked.message
        if checked.answers or msg is None:
            return _json("400 Bad Request", checked.answers[0] if checked.answers and not checked.batch
                         else jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "one JSON-RPC request"))
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "one JSON-RPC request"))
        if "id" not in msg:
            return "202 Accepted", [], b""  # a cancel is closing the response; nothing else means anything
        server, rid, method = _header(environ, RELAY_HEADER) or "", msg["id"], msg["method"]
        raw = msg.get("params")
        params: dict = raw if isinstance(raw, dict) else {}
        owned = self.rt.servers.current.get(server) if member.owns(server) else None
        if owned is None:  # never passed on: the loop guard
            return _json("503 Service Unavailable", jsonrpc.error(
                rid, jsonrpc.SERVER_UNAVAILABLE, f"instance {member.config.instance} does not run {server} now",
                NOT_RUN))
        ref = owned.ref if owned.callable else None
        target = owned.call_target()  # its front holds calls while this instance (its new owner) starts it
        if target is None:  # owned, but down here (restarting, failed, not yet approved here): no marker
            return _json("503 Service Unavailable", jsonrpc.error(
                rid, jsonrpc.SERVER_UNAVAILABLE, f"{server} is {owned.state} on instance {member.config.instance}"
                + (f": {owned.reason}" if owned.reason else "")))
        if method == modern.DISCOVER:
            return _json("200 OK", jsonrpc.result(rid, self._discover(server)))
        streams = "text/event-stream" in (environ.get("HTTP_ACCEPT") or "")
        if method == modern.LISTEN:
            asked = params.get("notifications")
            if not streams or not isinstance(asked, dict):
                return _json("400 Bad Request", jsonrpc.error(rid, jsonrpc.INVALID_PARAMS,
                                                              "a listen needs notifications and an SSE answer"))
            if ref is None:  # a listen follows one live Connection: its caller retries with backoff
                return _json("503 Service Unavailable", jsonrpc.error(
                    rid, jsonrpc.SERVER_UNAVAILABLE, f"{server} is not ready on instance {member.config.instance}"))
            return RelayListen(self.rt, ref, server, rid, asked).response(environ)
        caps = modern.Envelope(params["_meta"]).capabilities if modern.is_modern(params) else None
        upstream = modern.without_envelope(params) if modern.is_modern(params) else params
        if self.rounds.names_parked(upstream):  # the retry of a call waiting for its client's input
            call = self.rounds.resume(server, rid, method, upstream)
            if isinstance(call, dict):
                return _json("200 OK", call)
        else:
            call = RelayCall(target, server, rid, method, upstream, caps)
            # the sender proved the cluster secret: the client it names is the one it serves
            if not tell(call.ref, Forward(method, upstream, call.on_reply, origin=call, origin_request=call.token,
                                     on_progress=call.on_progress if call.progress_token is not None else None,
                                     client_capabilities=caps, client=_header(environ, CLIENT_HEADER))):
                return _json("503 Service Unavailable", jsonrpc.error(rid, jsonrpc.SERVER_UNAVAILABLE,
                                                                      f"{server} went away", NOT_RUN))
        shape = partial(answer, method=method, list_ttl_ms=RELAY_LIST_TTL_MS)
        if streams and call.progress_token is not None:
            return "200 OK", list(sse.HEADERS), progress_frames(environ, call, self.rounds, self._deadline(server),
                                                                 shape)
        return self._wait(environ, call, shape)

    def _deadline(self, server: str) -> float:
        return self.rt.server_timeout(server) + DEADLINE_MARGIN_S

    def _discover(self, server: str) -> dict:
        view = self.rt.servers.current.servers.get(server)
        info = (view.config.name if view else server)
        # Every notice a listen stream can carry (relay_streams): the caller follows list changes
        # and resource updates on it, and re-lists by ttl only while it is down.
        caps = {"tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
                "prompts": {"listChanged": True}, "completions": {}}
        return {"supportedVersions": [mcp.MODERN], "capabilities": caps,
                "serverInfo": {"name": info, "version": "relay"}, "resultType": "complete",
                "ttlMs": RELAY_LIST_TTL_MS, "cacheScope": "public"}

    def _wait(self, environ, call: RelayCall, shape) -> Response:
        """The call's answer, or its next input round, as one JSON answer."""
        deadline_s = self._deadline(call.server)
        deadline = time.monotonic() + deadline_s
        hung_up = object()  # this request's own: one left on the queue by an earlier request means nothing
        watcher = None  # most answers come at once: only a call still waiting after QUICK_S watches
        try:
            while True:
                if call.waiting and call.queue.empty():  # the server asks (or a retry left some unanswered)
                    return _json("200 OK", self.rounds.park(call))
                left = deadline - time.monotonic()
                if left <= 0:
                    call.abandon("no answer in time")
                    return _json("200 OK", shape(call.rid, UpstreamError(
                        jsonrpc.REQUEST_TIMEOUT, f"{call.server} gave no answer within {deadline_s:g}s",
                        server=call.server)))
                try:
                    item = call.queue.get(timeout=min(left, QUICK_S) if watcher is None else left)
                except gevent.queue.Empty:
                    if watcher is None:
                        watcher = watch_hangup(environ, lambda: call.queue.put(hung_up)) or False
                    continue
                if item is hung_up:
                    call.abandon("the calling instance went away")
                    return "200 OK", [], b""
                answered = call.take(item)
                if answered is not None:
                    return _json("200 OK", shape(call.rid, answered.outcome))
        finally:
            if watcher:
                watcher.kill(block=False)
