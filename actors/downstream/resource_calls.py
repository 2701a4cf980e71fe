"""The session's resource, prompt and completion requests: lists from the catalogue snapshot,
reads, subscriptions and completions forwarded to the owning server (routing.py says which)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.catalogue.snapshot import Catalogue
from actors.downstream import routing
from actors.downstream.client_subscriptions import ClientSubscriptions
from actors.downstream.replies import passthrough, restore_uris
from actors.messages import UpstreamError
from actors.protocol import jsonrpc, modern

if TYPE_CHECKING:
    from actors.runtime import Runtime


class ResourceCalls:
    """Mixed into Session: the handlers of its resource, prompt and completion requests; they keep
    no state of their own (subscriptions live in ClientSubscriptions) and use its rt,
    subscriptions, _served_version, _paged and _forward."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        subscriptions: ClientSubscriptions
        _served_version: dict[str, int]

        def catalogue(self) -> Catalogue: ...
        def passthrough_server(self) -> str | None: ...
        def _paged(self, rid, params, sink, items, key, cat: Catalogue, variant=()) -> None: ...
        def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                     retry: bool | None = None) -> None: ...
        def _forward_cached(self, plan, rid, server: str, method: str, params: dict, sink, shape,
                            progress_token=None, retry: bool | None = None) -> None: ...
        def resource_plan(self, server: str, uri: str): ...

    def _resources_list(self, rid, params, sink, msg) -> None:
        cat = self.catalogue()
        if modern.envelope_of(sink) is None:  # a modern request leaves nothing behind
            self._served_version["resources"] = cat.version
        self._paged(rid, params, sink, [dict(r.definition) for r in cat.resources], "resources", cat)

    def _templates_list(self, rid, params, sink, msg) -> None:
        cat = self.catalogue()
        self._paged(rid, params, sink, [dict(t.definition) for t in cat.templates], "resourceTemplates", cat)

    def _resources_read(self, rid, params, sink, msg) -> None:
        uri = params.get("uri")
        owner = self._owner_or_not_found(rid, uri, sink)
        if owner is None:
            return
        server, original = owner
        self._forward_cached(self.resource_plan(server, original), rid, server, "resources/read",
                             {**params, "uri": original}, sink, passthrough(lambda r: restore_uris(r, original, uri)))

    def _prompts_list(self, rid, params, sink, msg) -> None:
        cat = self.catalogue()
        if modern.envelope_of(sink) is None:
            self._served_version["prompts"] = cat.version
        self._paged(rid, params, sink, [dict(p.definition) for p in cat.prompts], "prompts", cat)

    def _prompts_get(self, rid, params, sink, msg) -> None:
        name = params.get("name")
        cat = self.catalogue()
        entry = cat.prompt(name) if isinstance(name, str) else None
        held = cat.withheld_prompt(name) if entry is None and isinstance(name, str) else None
        if held is not None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, held.message()))
            return
        if entry is None and isinstance(name, str) and (bare := self.passthrough_server()) is not None:
            self._forward(rid, bare, "prompts/get", params, sink, passthrough())
            return
        if entry is None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"unknown prompt: {name}"))
            return
        self._forward(rid, entry.server, "prompts/get", {**params, "name": entry.original}, sink, passthrough())

    def _resource_owner(self, uri) -> tuple[str, str] | None:
        return routing.resource_owner(self.catalogue(), self.passthrough_server(), uri)

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
        if self.subscriptions.follows(server, original):
            sink(jsonrpc.result(rid, {}))
            return
        subscriptions = self.subscriptions

        def shape(rid_, outcome):  # runs in this session's greenlet (see Session._settle)
            if not isinstance(outcome, UpstreamError):
                subscriptions.confirmed(server, original, uri)
            return passthrough()(rid_, outcome)
        self._forward(rid, server, "resources/subscribe", {"uri": original}, sink, shape)

    def _unsubscribe(self, rid, params, sink, msg) -> None:
        owner = self._resource_owner(params.get("uri"))
        if owner is not None:
            self.subscriptions.drop(*owner)
        sink(jsonrpc.result(rid, {}))

    def _complete(self, rid, params, sink, msg) -> None:
        target = routing.completion_target(self.catalogue(), self.passthrough_server(), params)
        if target is None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"no prompt or resource matches ref {params.get('ref')!r}"))
            return
        self._forward(rid, target[0], "completion/complete", target[1], sink, passthrough())
