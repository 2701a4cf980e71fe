"""Server-sent events framing for troupe's HTTP endpoints."""
from __future__ import annotations

import orjson

KEEPALIVE_S = 15.0  # a comment line this often keeps proxies and idle timeouts away
# Every SSE response's headers; X-Accel-Buffering stops nginx-style proxies holding events back.
HEADERS = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no"))


def event(data: dict | list | bytes | str, name: str | None = None, event_id: str | None = None) -> bytes:
    if isinstance(data, (dict, list)):  # a list: a batch's answers
        data = orjson.dumps(data)
    elif isinstance(data, str):
        data = data.encode()
    head = b""
    if event_id is not None:
        head += b"id: " + event_id.encode() + b"\n"
    if name:
        head += b"event: " + name.encode() + b"\n"
    # JSON from orjson has no newlines, so one data line is always enough
    return head + b"data: " + data + b"\n\n"


def comment(text: str = "keepalive") -> bytes:
    return b": " + text.encode() + b"\n\n"
