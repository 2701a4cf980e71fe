"""The session's resource, prompt and completion requests: lists from the catalogue snapshot,
reads, subscriptions and completions forwarded to the owning server (routing.py says which).
Like tools/list, each waits for start-up to settle when it needs what a starting server will
list: a list always, a read, get, subscribe or completion when its name is not known yet."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from actors.downstream import routing
from actors.downstream.client_subscriptions import ClientSubscriptions
from actors.downstream.replies import paged, passthrough, restore_uris
from actors.messages import UpstreamError
from actors.protocol import jsonrpc, modern

if TYPE_CHECKING:
    from actors.caching.session_side import CacheSide
    from actors.downstream.client_view import ClientView
    from actors.downstream.forwarder import Forwarder
    from actors.downstream.lifecycle import Handshake


class ResourceRequests:
    """A Session's resource, prompt and completion requests. No state of its own (subscriptions
    live in the Session's ClientSubscriptions). A plain object used only from its Session's
    greenlet, with explicit inputs: its client's view and handshake state, its subscriptions, its
    Forwarder (forwarded calls, and waits for start-up) and its cache side."""

    def __init__(self, view: ClientView, handshake: Handshake, subscriptions: ClientSubscriptions,
                 forwarder: Forwarder, cache: CacheSide) -> None:
        self._view, self._handshake, self._subscriptions = view, handshake, subscriptions
        self._fw, self._cache = forwarder, cache

    def _waited(self, msg, sink, needed: Callable[[], bool] = lambda: True) -> bool:
        """During start-up, a request that needs what a server still starting will list
        (`needed()`, asked only then) waits for it to settle (Forwarder.defer: bounded by
        startup_wait, withdrawn by a cancel) and is handled again: True if it was deferred."""
        if self._fw.starting_up() and needed():
            self._fw.defer(msg, sink)
            return True
        return False

    def _unlisted(self, uri) -> bool:
        """No server lists `uri` (nor a template that makes it) in this client's view: the
        passthrough server would be asked, and only when start-up has settled."""
        return routing.resource_owner(self._view.catalogue(), None, uri) is None

    def _listed(self, rid, params, sink, items: list, key: str, cat) -> None:
        """A page of list `key`; a session's client then holds that list of `cat` (a refused
        cursor showed it nothing; a modern request leaves nothing behind)."""
        if paged(rid, params, sink, items, key, cat) and modern.envelope_of(sink) is None:
            self._handshake.served(key, cat)

    def resources_list(self, rid, params, sink, msg) -> None:
        if self._waited(msg, sink):
            return
        cat = self._view.catalogue()
        self._listed(rid, params, sink, [dict(r.definition) for r in cat.resources], "resources", cat)

    def templates_list(self, rid, params, sink, msg) -> None:
        if self._waited(msg, sink):
            return
        cat = self._view.catalogue()
        self._listed(rid, params, sink, [dict(t.definition) for t in cat.templates], "resourceTemplates", cat)

    def resources_read(self, rid, params, sink, msg) -> None:
        uri = params.get("uri")
        if self._waited(msg, sink, lambda: self._unlisted(uri)):  # its server may still be starting
            return
        owner = self._owner_or_not_found(rid, uri, sink)
        if owner is None:
            return
        server, original = owner
        self._cache.forward(self._cache.resource_plan(server, original), rid, server, "resources/read",
                             {**params, "uri": original}, sink, passthrough(lambda r: restore_uris(r, original, uri)))

    def prompts_list(self, rid, params, sink, msg) -> None:
        if self._waited(msg, sink):
            return
        cat = self._view.catalogue()
        self._listed(rid, params, sink, [dict(p.definition) for p in cat.prompts], "prompts", cat)

    def prompts_get(self, rid, params, sink, msg) -> None:
        name = params.get("name")
        cat = self._view.catalogue()
        entry = cat.prompt(name) if isinstance(name, str) else None
        held = cat.withheld_prompt(name) if entry is None and isinstance(name, str) else None
        if held is not None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, held.message()))
            return
        if self._waited(msg, sink, lambda: entry is None):  # its server may still be starting
            return
        if entry is None and isinstance(name, str) and (bare := self._view.passthrough_server()) is not None:
            self._fw.forward(rid, bare, "prompts/get", params, sink, passthrough())
            return
        if entry is None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"unknown prompt: {name}"))
            return
        self._fw.forward(rid, entry.server, "prompts/get", {**params, "name": entry.original}, sink, passthrough())

    def _owner_or_not_found(self, rid, uri, sink) -> tuple[str, str] | None:
        """The owner of `uri`, or None after answering the request with resource-not-found."""
        owner = self._view.resource_owner(uri)
        if owner is None:
            sink(jsonrpc.error(rid, jsonrpc.RESOURCE_NOT_FOUND, f"resource not found: {uri}", {"uri": uri}))
        return owner

    def subscribe(self, rid, params, sink, msg) -> None:
        uri = params.get("uri")
        if self._waited(msg, sink, lambda: self._unlisted(uri)):
            return
        owner = self._owner_or_not_found(rid, uri, sink)
        if owner is None:
            return
        server, original = owner
        if self._subscriptions.follows(server, original):
            sink(jsonrpc.result(rid, {}))
            return
        subscriptions = self._subscriptions

        def shape(rid_, outcome):  # runs in this session's greenlet (see Session._settle)
            if not isinstance(outcome, UpstreamError):
                subscriptions.confirmed(server, original, uri)
            return passthrough()(rid_, outcome)
        self._fw.forward(rid, server, "resources/subscribe", {"uri": original}, sink, shape)

    def unsubscribe(self, rid, params, sink, msg) -> None:
        owner = self._view.resource_owner(params.get("uri"))
        if owner is not None:
            self._subscriptions.drop(*owner)
        sink(jsonrpc.result(rid, {}))

    def complete(self, rid, params, sink, msg) -> None:
        cat = self._view.catalogue()
        # the prompt or resource may be a starting server's (not the passthrough server's, yet)
        if self._waited(msg, sink, lambda: routing.completion_target(cat, None, params) is None):
            return
        target = routing.completion_target(cat, self._view.passthrough_server(), params)
        if target is None:
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"no prompt or resource matches ref {params.get('ref')!r}"))
            return
        self._fw.forward(rid, target[0], "completion/complete", target[1], sink, passthrough())
