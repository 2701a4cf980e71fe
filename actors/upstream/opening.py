"""The opening of a Connection in either protocol era: probe with `server/discover`, fall back
to `initialize`, respawn a stdio server that exits on the probe, and what only a modern upstream
needs afterwards (its listen stream, ttl re-lists, x-mcp-header checks, subscriptions by listen).

A mixin of the Connection actor: these methods run in its greenlet and touch only its state.
"""
from __future__ import annotations

from typing import Any, Callable

from actors.messages import EraLearned, UpstreamError
from actors.protocol import handshake, jsonrpc, modern_client
from actors.protocol.modern_client import LEGACY, MODERN
from actors.upstream.modern import ListenDue, ModernUpstream, valid_tools
from actors.tells import tell

INIT_TIMEOUT = 30.0  # the handshake, bounded separately from the per-call timeout
PROBE_TIMEOUT = 5.0  # server/discover on stdio: a legacy server that ignores it is not waited for long


class EraOpening:
    """The era half of the Connection actor (mixed into it): which era its server speaks
    (`era`, as the Supervisor remembered it or the probe showed), the probe in flight, and
    the ModernUpstream helper; the Connection calls `_open()` once its transport is open."""

    # What the Connection provides (declared for the type checker; set by Connection.__init__).
    config: Any
    generation: int
    log: Any
    supervisor: Any
    transport: Any
    capabilities: dict
    requests: Any
    lists: Any
    subscriptions: Any
    _client_caps: dict
    _failed: bool
    _factory: Callable[..., Any]
    _request: Callable[..., Any]
    _own_request: Callable[..., None]
    _send: Callable[[dict], None]
    _tell: Callable[[Any], None]
    _fail: Callable[[str], None]
    _opened: Callable[[Any], None]
    _from_transport: Callable[[Any], None]
    _transport_closed: Callable[[str], None]

    def _init_era(self, era: str | None) -> None:
        # The era the Supervisor remembers for this server identity (None: probe it); both paths stay here.
        self.era = era
        self._probing = False  # a server/discover whose answer decides the era is out
        self._retried_era = False  # one respawn or re-probe per generation, never a loop
        self.modern = ModernUpstream(lambda m, p, on_reply, t: self._request(m, p, on_reply, timeout=t),
                                     self._withdraw, self._tell, log=self.log)

    def _open(self) -> None:
        """The opening request: initialize for a server known to be legacy, else the probe."""
        timeout = min(INIT_TIMEOUT, max(self.config.timeout, 5.0))
        if self.era == LEGACY or self.config.transport == "sse":  # HTTP+SSE exists only in the legacy era
            # What troupe can relay for its clients (see Runtime.upstream_capabilities).
            method, params = handshake.opening(self._client_caps)
            self._request(method, params, self._initialized, timeout=timeout)
            return
        self._probing = True
        if self.config.transport == "stdio" and self.era is None:
            timeout = min(timeout, PROBE_TIMEOUT)  # on stdio a silence means legacy
        self._request(*handshake.discovery(), self._discovered, timeout=timeout)

    def _learn(self, era: str) -> None:
        if era != self.era:
            self.era = era
            tell(self.supervisor, EraLearned(self.config.name, self.generation, era))  # False: troupe is stopping

    def _discovered(self, outcome) -> None:
        if not self._probing:
            return  # the link was respawned meanwhile: this answer belongs to the old one
        self._probing = False
        if _ended_under(outcome):
            return
        if self.config.transport != "stdio" and modern_client.outage(outcome):
            self._fail(f"{modern_client.DISCOVER} failed: {outcome.message}")  # an outage is not an era
            return
        try:
            era = modern_client.verdict(outcome)
        except modern_client.Incompatible as exc:
            self._fail(str(exc))
            return
        if era == MODERN and not isinstance(outcome, dict):
            self._fail(f"{modern_client.DISCOVER} refused: {outcome.message}")
            return
        self._learn(era)
        if era == LEGACY:
            self._open()
            return
        try:
            self._opened(handshake.accept_discover(outcome))
        except handshake.HandshakeError as exc:
            self._fail(str(exc))

    def _initialized(self, outcome) -> None:
        if _ended_under(outcome):
            return
        if modern_client.refused_initialize(outcome) and not self._retried_era:
            self._retried_era = True  # modern after all (a slow starter missed the probe): probe again
            self.era = None
            self._open()
            return
        if isinstance(outcome, UpstreamError):
            self._fail(f"initialize failed: {outcome.message}")
            return
        try:
            opened = handshake.accept(outcome)
        except handshake.HandshakeError as exc:
            self._fail(str(exc))
            return
        self._opened(opened)

    def _modern_lists(self, lists: dict[str, tuple], done: tuple = (), changed: bool = True) -> dict[str, tuple]:
        """A modern upstream's lists: HTTP tools with invalid x-mcp-header dropped (their header map
        to the transport) when they changed, re-reads of the kinds just read scheduled by ttlMs,
        the listen stream (re)opened."""
        if changed and self.config.transport != "stdio":
            tools, maps = valid_tools(lists.get("tools", ()), log=self.log)
            lists = {**lists, "tools": tools}
            getattr(self.transport, "set_tool_headers", lambda _maps: None)(maps)
        self.modern.relist_after(done, self.lists.ttls, self.capabilities)
        self.modern.listen(self.capabilities, self.subscriptions.uris())
        return lists

    def _withdraw(self, rid) -> None:
        """Stop one of troupe's own requests (a listen stream): unanswered, cancelled upstream."""
        if self.requests.withdraw(rid) is not None:
            self._send(jsonrpc.notification("notifications/cancelled", {"requestId": rid}))

    def _subscription_request(self, method: str, params, on_reply) -> None:
        """resources/(un)subscribe: a legacy server is asked; a modern one hears the URIs on its
        listen stream, refreshed once the subscription is recorded."""
        if self.era != MODERN:
            self._own_request(method, params, on_reply)
            return
        on_reply({})
        self._tell(ListenDue(-1))

    def _respawned_legacy(self, reason: str) -> bool:
        """A stdio server that exited on the probe is a legacy one that wants initialize first:
        start it again, once, in the legacy era. True if so."""
        if not (self._probing and self.config.transport == "stdio") or self._retried_era or self._failed:
            return False
        self._retried_era, self._probing = True, False
        self.log.info("exited on {} ({}): starting it again as a legacy server", modern_client.DISCOVER, reason)
        self._learn(LEGACY)
        self.requests.fail_all(UpstreamError(jsonrpc.SERVER_UNAVAILABLE, reason, server=self.config.name))
        old, self.transport = self.transport, None
        try:
            if old is not None:
                old.close()
            self.transport = self._factory(self.config, self._from_transport, self._transport_closed)
            self.transport.open()
        except Exception as exc:  # TransportError or a bug: either way this generation is done
            self._fail(f"restart after {modern_client.DISCOVER} failed: {exc}")
            return True
        self._open()
        return True


def _ended_under(outcome) -> bool:
    """The connection stopped or failed with its opening request out (troupe stopping, a client
    leaving during start, a restart): the answer says nothing about the server's era, and whoever
    ended the connection has reported why. Taken for a verdict, it taught the Supervisor a modern
    server was legacy and sent `initialize` down a closing link."""
    return isinstance(outcome, UpstreamError) and outcome.link_lost
