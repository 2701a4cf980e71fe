"""The Connection's handshake and listing: initialize, then every list read page by page,
re-read on list_changed, published to the registry."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from actors.messages import ConnectionCounts, ConnectionReady, PublishServer, UpstreamError
from actors.protocol import jsonrpc, mcp
from actors.trust.provenance import identity_key as trust_identity

if TYPE_CHECKING:
    import pykka
    from loguru import Logger

    from actors.settings.config import ServerConfig
    from actors.transports.base import Transport

MAX_LIST_PAGES = 1000  # a server that pages forever is cut off


class Listing:
    """Mixed into Connection: uses its config, transport, capabilities, _lists, _listing,
    _ready, _failed, _request, _send, _fail, registry and supervisor."""

    if TYPE_CHECKING:  # provided by Connection
        config: ServerConfig
        generation: int
        supervisor: pykka.ActorRef
        registry: pykka.ActorRef
        log: Logger
        log_level: str | None
        transport: Transport | None
        capabilities: dict
        server_info: dict
        protocol_version: str
        _lists: dict[str, tuple]
        _listing: set[str]
        _ready: bool
        _failed: bool

        def _request(self, method: str, params: Any, on_reply, *, timeout: float, counted: bool = False,
                     on_progress=None, origin=None, origin_request=None) -> None: ...
        def _send(self, message: dict) -> None: ...
        def _fail(self, reason: str) -> None: ...
        def _set_log_level(self, level: str) -> None: ...
        def describe(self) -> dict: ...

    def _initialized(self, outcome) -> None:
        if isinstance(outcome, UpstreamError):
            self._fail(f"initialize failed: {outcome.message}")
            return
        version = outcome.get("protocolVersion")
        if version not in mcp.SUPPORTED_VERSIONS:
            self._fail(f"server speaks protocol {version!r}; troupe supports {', '.join(mcp.SUPPORTED_VERSIONS)}")
            return
        self.protocol_version = version
        self.capabilities = outcome.get("capabilities") or {}
        self.server_info = outcome.get("serverInfo") or {}
        assert self.transport is not None  # opened in on_start before initialize was sent
        self.transport.set_protocol_version(version)
        self._send(jsonrpc.notification("notifications/initialized"))
        self._list(tuple(mcp.LIST_METHODS))

    def _list(self, kinds) -> None:
        for kind in kinds:
            if mcp.LIST_CAPABILITY[kind] not in self.capabilities:
                self._lists[kind] = ()
                continue
            self._listing.add(kind)
            self._list_page(kind, None, [], 0)
        self._maybe_publish()

    def _list_page(self, kind: str, cursor, acc: list, pages: int) -> None:
        method, key = mcp.LIST_METHODS[kind]

        def on_page(outcome) -> None:
            if isinstance(outcome, UpstreamError):
                self.log.warning("{} failed: {}", method, outcome.message)
                self._lists[kind] = tuple(acc)
            else:
                items = outcome.get(key)
                acc.extend(i for i in (items if isinstance(items, list) else ()) if isinstance(i, dict))
                nxt = outcome.get("nextCursor")
                if nxt and nxt != cursor and pages + 1 < MAX_LIST_PAGES:
                    self._list_page(kind, nxt, acc, pages + 1)
                    return
                self._lists[kind] = tuple(acc)
            self._listing.discard(kind)
            self._maybe_publish()

        self._request(method, {"cursor": cursor} if cursor else None, on_page,
                      timeout=self.config.timeout)

    def _maybe_publish(self) -> None:
        if self._listing or self._failed:
            return
        lists = self._lists
        self.registry.tell(PublishServer(self.config.name, self.config.effective_prefix,
                                         lists.get("tools", ()), lists.get("resources", ()),
                                         lists.get("templates", ()), lists.get("prompts", ()),
                                         self.capabilities, trust_identity(self.config), self.config.pin))
        counts = (len(lists.get("tools", ())), len(lists.get("resources", ())), len(lists.get("prompts", ())))
        if not self._ready:
            self._ready = True
            self.log.info("ready: {} tools, {} resources, {} prompts", *counts)
            if self.log_level:
                self._set_log_level(self.log_level)
            self.supervisor.tell(ConnectionReady(self.config.name, self.generation, *counts, self.server_info,
                                                 self.describe()))
        else:
            self.supervisor.tell(ConnectionCounts(self.config.name, self.generation, *counts))
