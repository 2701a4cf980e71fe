"""The one way troupe makes a client transport from a server's config: used by the Connection
actor and by the discovery probe, so both reach a server the same way (same headers, same limits).
Transports are imported lazily: the HTTP ones pull in requests."""
from __future__ import annotations

from loguru import logger

from actors.settings.config import ServerConfig
from actors.transports.base import OnClosed, OnMessage, Transport


def make_transport(config: ServerConfig, on_message: OnMessage, on_closed: OnClosed, *,
                   connect_timeout: float | None = None, log=logger, auth=None, early=None) -> Transport:
    """The transport the config asks for, not yet opened. connect_timeout bounds an HTTP connect
    (None: the transport's default); the stdio transport has no connect step. `auth` (an
    actors.auth.access.UpstreamAuthAccess) gives HTTP servers OAuth; `early` (an
    actors.supervision.early_start.EarlyStarts) holds stdio processes launched at start."""
    if config.transport == "stdio":
        from actors.transports.stdio import StdioTransport
        assert config.stdio is not None  # config.py gives every stdio server its StdioSpec
        return StdioTransport(config.name, config.stdio, on_message, on_closed, log=log,
                              max_message_bytes=config.max_message_bytes, write_timeout=config.timeout,
                              process=early.take(config.name, config.stdio) if early is not None else None)
    assert config.http is not None  # config.py gives every HTTP server its HttpSpec
    headers = dict(config.http.headers)  # a copy: a transport may add to its own
    extra: dict = {} if connect_timeout is None else {"connect_timeout": connect_timeout}
    # Not for a server with its own Authorization header, nor for a relay to another troupe instance
    # (X-Troupe-Relay, placing.py): troupe signs in to upstreams, never to itself.
    relay = any(k.lower() == "x-troupe-relay" for k in headers)
    if auth is not None and not relay and not any(k.lower() == "authorization" for k in headers):
        extra.update(auth=auth, auth_settings=config.auth)
    if relay:  # the owner sends a client's call with that client's own token (auth: per_client)
        extra["client_header"] = "X-Troupe-Client"
    if config.transport == "sse":
        from actors.transports.legacy_sse import SseTransport
        return SseTransport(config.name, config.http.url, headers, on_message, on_closed, log=log, **extra)
    from actors.transports.streamable_http import StreamableHttpTransport
    return StreamableHttpTransport(config.name, config.http.url, headers, on_message, on_closed, log=log,
                                   **extra)
