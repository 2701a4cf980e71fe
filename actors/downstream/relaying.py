"""Session handlers for what troupe relays besides tool calls: server→client requests,
resource subscriptions, logging and completion."""
from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, Callable, cast

import pykka
from loguru import logger

from actors.events.kinds import ServerLogged
from actors.messages import Forward, ServerRequest, UpstreamError
from actors.protocol import jsonrpc, mcp
from actors.downstream.replies import ignore, passthrough

if TYPE_CHECKING:
    from actors.runtime import Runtime
    from actors.downstream.session import _Call

LOG_LEVELS = mcp.LOG_LEVELS
# The client capability each relayed server→client request needs.
NEEDS = mcp.RELAYED_REQUESTS


class RelayHandlers:
    """Mixed into Session: uses its rt, key, notify, client_caps, _inflight, _outgoing, _forward."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        key: str
        notify: Callable[[dict], Any] | None
        client_caps: dict
        log_level: str | None
        actor_ref: pykka.ActorRef
        _inflight: dict[Any, _Call]
        _outgoing: dict[str, tuple]
        _outgoing_ids: itertools.count
        _subscribed: dict[tuple[str, str], str]

        def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                     retry: bool | None = None) -> None: ...

    def _client_response(self, msg: dict) -> None:
        entry = self._outgoing.pop(cast(Any, msg.get("id")), None) if isinstance(msg.get("id"), (str, int)) else None
        if entry is None:
            logger.debug("session {}: response to unknown request {!r} dropped", self.key, msg.get("id"))
            return
        on_reply, server, _ = entry
        error = msg.get("error")
        if isinstance(error, dict):
            on_reply(UpstreamError(error.get("code", jsonrpc.INTERNAL_ERROR), str(error.get("message", "")),
                                   error.get("data"), server=server))
        else:
            result = msg.get("result")
            on_reply(result if isinstance(result, dict) else {})


    def _server_request(self, req: ServerRequest) -> None:
        need = NEEDS.get(req.method)
        if need not in self.client_caps:
            req.on_reply(UpstreamError(jsonrpc.METHOD_NOT_FOUND, f"this client does not support {need}"))
            return
        call = self._inflight.get(req.origin_request)
        sink = call.sink if call is not None else self.notify
        if sink is None:
            req.on_reply(UpstreamError(jsonrpc.INTERNAL_ERROR, "no open stream to the client"))
            return
        our_id = f"troupe-{next(self._outgoing_ids)}"
        self._outgoing[our_id] = (req.on_reply, req.server, req.upstream_id)
        params = dict(req.params)
        if req.method == "elicitation/create" and isinstance(params.get("message"), str):
            params["message"] = f"[{req.server}] {params['message']}"  # say which server is asking
        sink(jsonrpc.request(our_id, req.method, params))


    def _resource_owner(self, uri) -> tuple[str, str] | None:
        """(server, upstream URI); an unlisted URI goes to the passthrough server if there is one."""
        if not isinstance(uri, str):
            return None
        owner = self.rt.catalogue().resource_owner(uri)
        if owner is None and (bare := self.rt.passthrough_server()) is not None:
            return bare, uri
        return owner

    def _owner_or_not_found(self, rid, uri, sink) -> tuple[str, str] | None:
        """The owner of `uri`, or None after answering the request with resource-not-found."""
        owner = self._resource_owner(uri)
        if owner is None:
            sink(jsonrpc.error(rid, jsonrpc.RESOURCE_NOT_FOUND, f"resource not found: {uri}", {"uri": uri}))
        return owner

    def _subscribe(self, rid, params, sink, msg) -> None:
        uri = params.get("uri")
        owner = self._owner_or_not_found(rid, uri, sink)
        if owner is None:
            return
        server, original = owner
        if (server, original) in self._subscribed:
            sink(jsonrpc.result(rid, {}))
            return
        subscribed = self._subscribed

        def shape(rid_, outcome):  # runs in this session's greenlet (see Session._settle)
            if not isinstance(outcome, UpstreamError):
                subscribed[(server, original)] = uri
            return passthrough()(rid_, outcome)
        self._forward(rid, server, "resources/subscribe", {"uri": original}, sink, shape)


    def _unsubscribe(self, rid, params, sink, msg) -> None:
        uri = params.get("uri")
        owner = self._resource_owner(uri)
        if owner is not None and owner in self._subscribed:
            self._drop_subscription(*owner)
        sink(jsonrpc.result(rid, {}))


    def _drop_subscription(self, server: str, uri: str) -> None:
        """The connection counts followers: upstream hears unsubscribe when the last one leaves."""
        self._subscribed.pop((server, uri), None)
        ref = self.rt.connection(server)
        if ref is not None:
            try:
                ref.tell(Forward("resources/unsubscribe", {"uri": uri}, ignore, origin=self.actor_ref))
            except pykka.ActorDeadError:
                pass  # a new generation of it never heard of this subscription


    def _set_level(self, rid, params, sink, msg) -> None:
        level = params.get("level")
        if level not in LOG_LEVELS:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}"))
            return
        self.log_level = level
        self.rt.set_log_level(self.actor_ref, level)
        sink(jsonrpc.result(rid, {}))


    def _relay_log(self, event: ServerLogged) -> None:
        if self.log_level is None or self.notify is None:
            return
        level = event.level if event.level in LOG_LEVELS else "info"
        if LOG_LEVELS.index(level) < LOG_LEVELS.index(self.log_level):
            return
        params = {"level": level, "logger": f"{event.server}/{event.logger}" if event.logger else event.server,
                  "data": event.data}
        self.notify(jsonrpc.notification("notifications/message", params))


    def _complete(self, rid, params, sink, msg) -> None:
        ref = params.get("ref")
        cat = self.rt.catalogue()
        target = None
        if isinstance(ref, dict) and ref.get("type") == "ref/prompt":
            entry = cat.prompt(cast(str, ref.get("name"))) if isinstance(ref.get("name"), str) else None
            if entry is not None:
                target = (entry.server, {**params, "ref": {**ref, "name": entry.original}})
        elif isinstance(ref, dict) and ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
            owner = cat.resource_owner(ref["uri"])
            for tpl in cat.templates:  # a template's own URI is a valid completion ref too
                if owner is None and tpl.uri == ref["uri"]:
                    owner = (tpl.server, tpl.original)
            if owner is not None:
                target = (owner[0], {**params, "ref": {**ref, "uri": owner[1]}})
        if target is None and (bare := self.rt.passthrough_server()) is not None:
            target = (bare, params)
        if target is None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"no prompt or resource matches ref {ref!r}"))
            return
        self._forward(rid, target[0], "completion/complete", target[1], sink, passthrough())

