"""2025-03-26 JSON-RPC batches: every entry handled as if sent alone, the answers sent as one array."""
from __future__ import annotations

from typing import Any, Callable

import gevent

from actors.protocol import jsonrpc
from actors.slicing import PAUSE_SECONDS, Slices


# Members handed on per turn of the hub: 100 core_status calls at once held another client's call
# ~100 ms (each ~1 ms of CPU, all runnable together); 8 at a time keep a turn to a few ms.
BATCH_STEP = 8


def serve_batch(batch: list, sink: Callable[[Any], None], handle: Callable[[Any, Callable], None]) -> None:
    """Hand each entry to `handle(message, sink)`; the answers go to `sink` together, as one array,
    once the last expected one arrived (notifications a handler sends pass straight through).
    The entries are handled in slices (actors/slicing.py), the hub let run between them: a batch
    (at most serve.max_batch, checked where it entered) never holds the other clients' calls.
    A member may start work of its own (a core tool runs in a greenlet): after every BATCH_STEP
    members the hub runs that work before more starts, so a batch is BATCH_STEP calls at a time.
    The Session's own mailbox waits meanwhile, so its state is still only this batch's to touch."""
    # Entries that get an answer: anything but a notification or a response from the client.
    expected = sum(1 for m in batch if not (isinstance(m, dict) and (
        ("method" in m and "id" not in m) or ("method" not in m and ("result" in m or "error" in m)))))
    collect = _Collector(sink, expected)
    pause = Slices()
    for i, m in enumerate(batch):
        if i and i % BATCH_STEP == 0:
            gevent.sleep(PAUSE_SECONDS)  # the greenlets the last members started (core tools) run first
        pause()
        if isinstance(m, dict) and m.get("method") == "initialize":
            collect(jsonrpc.error(m.get("id"), jsonrpc.INVALID_REQUEST, "initialize must not be batched"))
        else:
            handle(m, collect if expected else sink)


class _Collector:
    """Gathers a batch's answers (any greenlet) and sends them as one array once the last one
    owed is in; notifications pass straight through. A cancelled entry (`withdrawn`) is owed
    nothing, so the array goes out without it."""

    __slots__ = ("sink", "expected", "answers")

    def __init__(self, sink: Callable[[Any], None], expected: int) -> None:
        self.sink, self.expected, self.answers = sink, expected, []

    def __call__(self, message: dict) -> None:
        if "method" in message:
            self.sink(message)
            return
        self.answers.append(message)
        self._flush()

    def withdrawn(self, rid) -> None:
        self.expected -= 1
        self._flush()

    def _flush(self) -> None:
        if self.expected >= 0 and len(self.answers) == self.expected:
            self.expected = -1  # sent: once
            if self.answers:
                self.sink(self.answers)
                return
            hook = getattr(self.sink, "withdrawn", None)  # every entry cancelled: no answer at all
            if hook is not None:
                hook(None)
