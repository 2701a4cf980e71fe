"""The client-side transport contract every upstream transport implements."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol

# A transport hands each parsed JSON-RPC message (a dict) to on_message, from its
# own reader greenlet. A line or event that could not be parsed is handed on as a
# TransportGarbage value instead, so the owner can log it and, when it can tell
# which request it belonged to, answer that request. An HTTP request that failed below
# HTTP is answered by a LinkFailure value, which says whether the request left troupe.
OnMessage = Callable[[Any], None]
# Called exactly once when the transport is gone for good (process exited, stream
# closed and not resumable); the argument says why, for the status report.
OnClosed = Callable[[str], None]


# The start of a failure reason that means "the server wants a sign-in" (HTTP 401): the Supervisor
# holds such a server in needs-auth instead of restarting it (see actors/auth).
NEEDS_AUTH = "needs auth"


class TransportError(Exception):
    """The transport could not be opened or a message could not be sent."""


@dataclass(frozen=True, slots=True)
class TransportGarbage:
    """Something arrived that is not a JSON-RPC message.

    request_id is set when the garbage still let us see which request it answered
    (an oversized line whose head carries the id), so that request fails at once.
    """

    reason: str
    request_id: Any = None
    lines: int = 1  # stdout lines in a row this stands for (the stdio reader sums a run of junk)


@dataclass(frozen=True, slots=True)
class OnStream:
    """A server's request that arrived on the response stream of one of troupe's own requests
    (Streamable HTTP's POST SSE stream): `request_id` is that request's id, so the request
    belongs to the client call behind it, whoever else has calls in flight."""

    message: Any
    request_id: Any


@dataclass(frozen=True, slots=True)
class LinkFailure:
    """An HTTP request failed below HTTP: handed to on_message in place of its answer.

    `sent` is False when the connection was refused or never made (the request did not leave
    troupe), True when the link broke with the request out (the server may have run it).
    """

    request_id: Any
    reason: str
    sent: bool


class Transport(Protocol):
    """What the Connection actor needs from a transport; no pykka in here.

    Implementations: stdio.StdioTransport, streamable_http.StreamableHttpTransport,
    legacy_sse.SseTransport. All methods are called from the Connection actor's greenlet
    and must not block it for long: network round trips run in their own greenlets.
    """

    def open(self) -> None:
        """Start the process or stream; raise TransportError on failure."""

    def send(self, message: dict) -> None:
        """Send one JSON-RPC message; raise TransportError if the link is gone."""

    def set_protocol_version(self, version: str) -> None:
        """Told after initialize so HTTP transports can send MCP-Protocol-Version."""

    def close(self) -> None:
        """Release everything (child processes, sockets); idempotent, bounded time."""

    def describe(self) -> dict:
        """Safe facts for the status report: {"pid": ...} or {"url": ...}; never secrets."""
        ...
