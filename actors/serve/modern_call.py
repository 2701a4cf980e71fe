"""One modern (2026-07-28) request in flight on the HTTP front: its buffer toward the client
(serve.stream_buffer_bytes of what precedes its answer), and the renaming of troupe's ids back
to the client's in what it is sent."""
from __future__ import annotations

from typing import Any

from actors.protocol import modern
from actors.serve import sse_framing as sse
from actors.serve.stream_buffer import StreamBuffer, StreamStats, droppable, shut_down_later
from actors.settings.model import DEFAULT_STREAM_BUFFER_BYTES

SUBSCRIPTION_META = modern.META_PREFIX + "subscriptionId"
HUNG_UP = object()  # reply buffer sentinel: the client closed the response (or it fell behind)


def outward(call: ModernCall, message: dict) -> dict:
    """The message as its client must see it: troupe's id for the request renamed back (and, on
    a listen, the subscription id its messages carry: only a listen's can bear troupe's id)."""
    if "method" not in message:
        message = {**message, "id": call.client_id}
        if call.listen and isinstance(message.get("result"), dict):
            message["result"] = _rename_subscription(call, message["result"])
    elif call.listen and isinstance(message.get("params"), dict):
        message = {**message, "params": _rename_subscription(call, message["params"])}
    return message


def _rename_subscription(call: ModernCall, body: dict) -> dict:
    meta = body.get("_meta")
    if isinstance(meta, dict) and meta.get(SUBSCRIPTION_META) == call.our_id:
        return {**body, "_meta": {**meta, SUBSCRIPTION_META: call.client_id}}
    return body


class ModernCall:
    """One modern request in flight: the client's id, troupe's id for it, the buffer its Session
    answers into (serve.stream_buffer_bytes of what precedes the answer, on an SSE reply), and
    the Session generation it went to."""

    __slots__ = ("client_id", "our_id", "replies", "listen", "session", "answered", "client", "stream", "closer")

    def __init__(self, client_id, our_id: str, listen: bool, session, client=None, stream: bool = False,
                 limit: int = DEFAULT_STREAM_BUFFER_BYTES, stats: StreamStats | None = None):
        self.client_id, self.our_id, self.listen, self.client = client_id, our_id, listen, client
        self.replies = StreamBuffer(limit, stats, "modern")
        self.session: Any = session
        self.answered = False
        self.stream = stream  # the reply is an SSE stream: what precedes the answer can travel
        self.closer: Any = None  # the socket's delayed shut-down (a Greenlet), once the stream fell behind

    def deliver(self, message) -> None:
        """The Session's sink for this request (its greenlet): the answer goes on as it is (one,
        never dropped); what precedes it is encoded and counted here, as its client will see it,
        or dropped at once when the reply is JSON (no room for it there)."""
        if type(message) is dict and "method" in message:
            if self.stream:
                self.replies.offer(sse.event(outward(self, message), name="message"), droppable(message))
            return
        self.replies.put(message)


def overflowed(call: ModernCall, environ) -> None:
    """What cannot be dropped did not fit (the Session's greenlet): the call ends as on a hang-up
    (cancelled upstream), and its socket is shut down after a grace, ending a blocked write."""
    call.replies.put(HUNG_UP)
    call.closer = shut_down_later(environ) if environ is not None else None
