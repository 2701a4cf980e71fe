"""The owner's side of a call between instances: POST /mcp with X-Troupe-Relay names a `single`
server this instance runs, and the request goes straight to that server's Connection.

It is ordinary modern MCP (the caller's Connection speaks 2026-07-28 to it, envelope and all),
with three differences from a client's request: it must carry the cluster secret (compared in
constant time), it reaches one server's own names and lists (no catalogue, no prefix), and it is
never passed on: a server this instance does not own is refused with 503 (the loop guard; the
caller's lease keeper learns the new owner within a third of a lease). Closing the response
cancels the call upstream, as on the client front. Answers are JSON, except a call asking for
progress and a `subscriptions/listen`, which are streamed (see relay_streams).
"""
from __future__ import annotations

import hmac
import itertools
import time

import gevent.event
import orjson

from actors.messages import CancelForward, Forward, UpstreamError
from actors.protocol import jsonrpc, mcp, modern
from actors.serve.listener import watch_hangup
from actors.serve.relay_streams import RelayListen, answer, call_with_progress
from actors.supervision.placing import RELAY_HEADER, TOKEN_HEADER
from actors.tells import tell

RELAY_LIST_TTL_MS = 5_000  # lists read through a relay are re-read this often if its listen stream is down
DEADLINE_MARGIN_S = 5.0
QUICK_S = 0.05
_origins = itertools.count(1)

Response = tuple[str, list, bytes]


def _header(environ, name: str) -> str | None:
    return environ.get("HTTP_" + name.upper().replace("-", "_"))


def _json(status: str, body) -> Response:
    return status, [("Content-Type", "application/json")], orjson.dumps(body)


def is_relay(environ) -> bool:
    return _header(environ, RELAY_HEADER) is not None


class Relay:
    """Answers relayed requests for the servers this instance owns. Holds nothing between
    requests: each waits for its one answer in its own handler greenlet."""

    def __init__(self, runtime) -> None:
        self.rt = runtime

    def post(self, environ, body: bytes) -> Response:
        member = self.rt.cluster
        token = member.token if member is not None else None
        if member is None or token is None:
            return _json("503 Service Unavailable", jsonrpc.error(None, jsonrpc.SERVER_UNAVAILABLE,
                                                                  "this instance has not joined its cluster"))
        if not hmac.compare_digest((_header(environ, TOKEN_HEADER) or "").encode(), token.encode()):
            return _json("403 Forbidden", jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "not a member of this cluster"))
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"parse error: {exc}"))
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return _json("400 Bad Request", jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "one JSON-RPC request"))
        if "id" not in msg:
            return "202 Accepted", [], b""  # a cancel is closing the response; nothing else means anything
        server, rid, method = _header(environ, RELAY_HEADER) or "", msg["id"], msg["method"]
        raw = msg.get("params")
        params: dict = raw if isinstance(raw, dict) else {}
        ref = self.rt.connection(server) if member.owns(server) else None
        if ref is None:  # never passed on: the loop guard
            return _json("503 Service Unavailable", jsonrpc.error(
                rid, jsonrpc.SERVER_UNAVAILABLE, f"instance {member.config.instance} does not run {server} now"))
        if method == modern.DISCOVER:
            return _json("200 OK", jsonrpc.result(rid, self._discover(server)))
        streams = "text/event-stream" in (environ.get("HTTP_ACCEPT") or "")
        if method == modern.LISTEN:
            asked = params.get("notifications")
            if not streams or not isinstance(asked, dict):
                return _json("400 Bad Request", jsonrpc.error(rid, jsonrpc.INVALID_PARAMS,
                                                              "a listen needs notifications and an SSE answer"))
            return RelayListen(self.rt, ref, server, rid, asked).response(environ)
        caps = modern.Envelope(params["_meta"]).capabilities if modern.is_modern(params) else None
        upstream = modern.without_envelope(params) if modern.is_modern(params) else params
        if streams and isinstance(upstream.get("_meta"), dict) and "progressToken" in upstream["_meta"]:
            streamed = call_with_progress(environ, ref, rid, method, upstream, caps, self._deadline(server),
                                          lambda outcome: answer(rid, method, outcome, RELAY_LIST_TTL_MS))
            return streamed or _json("503 Service Unavailable", jsonrpc.error(
                rid, jsonrpc.SERVER_UNAVAILABLE, f"{server} went away"))
        return self._forward(environ, ref, server, rid, method, upstream, caps)

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

    def _forward(self, environ, ref, server: str, rid, method: str, params: dict, caps) -> Response:
        waiting: gevent.event.AsyncResult = gevent.event.AsyncResult()
        origin = ("relay", next(_origins))
        if not tell(ref, Forward(method, params, waiting.set, origin=origin, origin_request=rid,
                                 client_capabilities=caps)):
            return _json("503 Service Unavailable", jsonrpc.error(rid, jsonrpc.SERVER_UNAVAILABLE,
                                                                  f"{server} went away"))
        deadline = self._deadline(server)
        started = time.monotonic()
        # Most answers come at once: only a call still waiting after QUICK_S watches for a hang-up.
        watcher = None if waiting.wait(QUICK_S) else watch_hangup(environ, lambda: waiting.set(_HUNG_UP))
        try:
            outcome = waiting.get(timeout=deadline)
        except gevent.Timeout:
            outcome = UpstreamError(jsonrpc.REQUEST_TIMEOUT, f"{server} gave no answer within {deadline:g}s",
                                    server=server)
        finally:
            if watcher is not None:
                watcher.kill(block=False)
        if outcome is _HUNG_UP or isinstance(outcome, UpstreamError) and time.monotonic() - started >= deadline:
            tell(ref, CancelForward(origin, rid, "the calling instance went away" if outcome is _HUNG_UP
                                    else "no answer in time"))
            if outcome is _HUNG_UP:
                return "200 OK", [], b""
        return _json("200 OK", answer(rid, method, outcome, RELAY_LIST_TTL_MS))


_HUNG_UP = object()
