"""Reading a server-sent event stream, for both HTTP transports: events as soon as their bytes
arrive, payloads parsed into messages (or garbage), where a stream stood for resuming it, and
how another greenlet wakes a reader blocked on it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import requests
import sseclient

from actors.protocol import jsonrpc
from actors.transports.base import TransportGarbage

# sseclient's default reader iterates the response, and urllib3 fills a whole
# chunk before yielding: small events arrived 200-600 ms late. read1 hands over
# whatever bytes are already there.
READ_CHUNK = 65536
SSE_MEDIA_TYPE = "text/event-stream"
# Reconnect delays when the server gave no `retry`; a server's `retry` is capped
# so a hostile value cannot park a reader for hours.
BACKOFF_MIN = 0.2
BACKOFF_MAX = 5.0
MAX_RETRY_DELAY = 60.0


def backoff(attempt: int) -> float:
    return min(BACKOFF_MAX, BACKOFF_MIN * 2 ** max(0, attempt - 1))


def parse_payload(data: bytes | str) -> list:
    """JSON text → messages (a list is a batch); what is not a message becomes garbage."""
    try:
        value = jsonrpc.decode(data)
    except jsonrpc.TooDeep as exc:  # an answer's id still fails its request at once
        return [TransportGarbage(str(exc), exc.message_id if exc.answer else None)]
    except ValueError as exc:
        return [TransportGarbage(f"invalid JSON: {exc}")]
    items = value if isinstance(value, list) else [value]
    return [m if isinstance(m, dict) else TransportGarbage("not a JSON-RPC object") for m in items]


def sse_events(resp: requests.Response) -> Iterator[sseclient.Event]:
    """Parsed events of a streamed response, each as soon as its bytes arrive."""
    raw = resp.raw

    def chunks() -> Iterator[bytes]:
        while True:
            chunk = raw.read1(READ_CHUNK, decode_content=True)
            if not chunk:
                return
            yield chunk

    return sseclient.SSEClient(chunks()).events()


def shutdown_response(resp: requests.Response) -> None:
    """Wake a reader blocked on resp from another greenlet.

    urllib3 >= 2.3 keeps the socket's shutdown method for exactly this:
    HTTPResponse.shutdown() does sock.shutdown(SHUT_RD), so the blocked recv
    returns EOF and the reader leaves its loop; resp.close() then closes the
    socket. It raises once the connection went back to the pool (nothing is
    blocked on it then), so a pooled connection in use elsewhere is never hit.
    """
    try:
        resp.raw.shutdown()
    except (ValueError, RuntimeError, OSError, AttributeError):
        pass


@dataclass(slots=True)
class StreamCursor:
    """Where an SSE stream stood: what to resume from and when."""

    last_event_id: str | None = None
    retry: float | None = None

    def note(self, event: sseclient.Event) -> None:
        if event.id is not None:
            # An empty id resets the last event id, as in the EventSource spec.
            self.last_event_id = event.id or None
        if event.retry and str(event.retry).isdigit():
            self.retry = min(MAX_RETRY_DELAY, int(event.retry) / 1000)

    def delay(self, attempt: int) -> float:
        return self.retry if self.retry is not None else backoff(attempt)
