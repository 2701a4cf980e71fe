"""The client side of MCP's opening exchange, in one place for every client troupe has: the
Connection actor and the discovery probe.

The session era (every version in mcp.SUPPORTED_VERSIONS today) opens with `initialize`, checks
the version the server chose, and confirms with `notifications/initialized`. A caller asks
`opening()` what to send, hands the answer's result to `accept()`, and sends what
`confirmation()` returns, if anything. The stateless era (MCP 2026-07-28, `server/discover`,
no confirmation) opens with `discovery()` instead: its answer goes to `accept_discover()`,
and `modern_client.verdict()` tells from it which era the server speaks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from actors.protocol import jsonrpc, mcp, modern, modern_client

INITIALIZE = "initialize"
INITIALIZED = "notifications/initialized"


class HandshakeError(Exception):
    """The server's answer to the opening request cannot start a session; the message says why."""


@dataclass(frozen=True, slots=True)
class Handshake:
    """What a server told about itself when the session opened."""

    version: str
    capabilities: dict = field(default_factory=dict)
    server_info: dict = field(default_factory=dict)
    instructions: str = ""  # the server's own words on what it is for (tool search reads them)


def opening(capabilities: dict | None = None, client_info: dict | None = None) -> tuple[str, dict]:
    """(method, params) of the first request: troupe's newest version, what the client can do
    (the Connection relays sampling and the like; a probe offers nothing) and who asks."""
    return INITIALIZE, {"protocolVersion": mcp.LATEST, "capabilities": capabilities or {},
                        "clientInfo": client_info or mcp.CLIENT_INFO}


def accept(result: Any) -> Handshake:
    """The server's answer (the response's result) checked: a version troupe speaks, its
    capabilities and serverInfo; HandshakeError otherwise."""
    if not isinstance(result, dict):
        raise HandshakeError(f"{INITIALIZE} answered with no result object ({type(result).__name__})")
    version = result.get("protocolVersion")
    if version not in mcp.SUPPORTED_VERSIONS:
        raise HandshakeError(f"server speaks protocol {version!r}; troupe supports "
                             f"{', '.join(mcp.SUPPORTED_VERSIONS)}")
    return Handshake(version, result.get("capabilities") or {}, result.get("serverInfo") or {},
                     _instructions(result))


def confirmation(handshake: Handshake) -> dict | None:
    """The notification that completes the opening, or None when the version has none."""
    if handshake.version in modern_client.MODERN_VERSIONS:
        return None  # the stateless era has no session to confirm
    return jsonrpc.notification(INITIALIZED)


def discovery(capabilities: dict | None = None, client_info: dict | None = None) -> tuple[str, dict]:
    """(method, params) of the stateless era's opening: `server/discover` in the modern envelope."""
    params = modern_client.envelope(None, capabilities)
    if client_info is not None:
        params["_meta"][modern_client.META_CLIENT_INFO] = client_info
    return modern_client.DISCOVER, params


def accept_discover(result: Any) -> Handshake:
    """A DiscoverResult naming a modern version as the Handshake of the stateless era: its
    capabilities (less those troupe does not implement) and the serverInfo stamp of its _meta."""
    if not isinstance(result, dict):
        raise HandshakeError(f"{modern_client.DISCOVER} answered with no result object")
    supported = result.get("supportedVersions")
    if not isinstance(supported, list) or modern_client.MODERN_VERSION not in supported:
        raise HandshakeError(f"server speaks protocol {supported!r}; troupe's stateless era is "
                             f"{modern_client.MODERN_VERSION}")
    meta = result.get("_meta")
    info = meta.get(modern.META_SERVER_INFO) if isinstance(meta, dict) else None
    return Handshake(modern_client.MODERN_VERSION, modern_client.forwarded_capabilities(result.get("capabilities")),
                     info if isinstance(info, dict) else {}, _instructions(result))


def _instructions(result: dict) -> str:
    text = result.get("instructions")
    return text if isinstance(text, str) else ""
