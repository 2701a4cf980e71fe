"""2025-03-26 JSON-RPC batches: every entry handled as if sent alone, the answers sent as one array."""
from __future__ import annotations

from typing import Any, Callable

from actors.protocol import jsonrpc


def serve_batch(batch: list, sink: Callable[[Any], None], handle: Callable[[Any, Callable], None]) -> None:
    """Hand each entry to `handle(message, sink)`; the answers go to `sink` together, as one array,
    once the last expected one arrived (notifications a handler sends pass straight through)."""
    # Entries that get an answer: anything but a notification or a response from the client.
    expected = sum(1 for m in batch if not (isinstance(m, dict) and (
        ("method" in m and "id" not in m) or ("method" not in m and ("result" in m or "error" in m)))))
    answers: list = []

    def collect(message: dict) -> None:  # any greenlet: answers gathered, the rest passed on
        if "method" in message:
            sink(message)
            return
        answers.append(message)
        if len(answers) == expected:
            sink(answers)
    for m in batch:
        if isinstance(m, dict) and m.get("method") == "initialize":
            collect(jsonrpc.error(m.get("id"), jsonrpc.INVALID_REQUEST, "initialize must not be batched"))
        else:
            handle(m, collect if expected else sink)
