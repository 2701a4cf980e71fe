"""EventBus actor: tell-only fan-out of events to subscribers, with a short history."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable

import orjson
import pykka
from loguru import logger

from actors.events.kinds import Event
from actors.tells import tell

HISTORY_SIZE = 500  # events kept for /events and core_events…
HISTORY_BYTES = 1024 * 1024  # …and at most this many bytes of them (as JSON), oldest dropped first


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Deliver events whose class name is in `types` (empty = all) to `callback`.

    The callback runs in the bus greenlet and must not block: typically an
    ActorRef.tell or a gevent queue put. `token` identifies it for Unsubscribe.
    """

    token: object
    callback: Callable[[Event], None]
    types: frozenset = frozenset()


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    """Told by BusClient.unsubscribe to the EventBus: stop delivering to the Subscribe with `token`."""

    token: object


@dataclass(frozen=True, slots=True)
class Publish:
    """Told by BusClient.publish to the EventBus: keep `event` in the history, hand it to matching subscribers."""

    event: Event


@dataclass(frozen=True, slots=True)
class GetHistory:
    """Reply: list of recent events (newest last) through `reply`."""

    reply: Callable[[list], None]
    limit: int = 100


class EventBus(pykka.ThreadingActor):
    """Fans out events; never asks anyone, never lets one bad subscriber stop it.

    Owns the subscribers and the history: the last HISTORY_SIZE events, at most HISTORY_BYTES
    of them, each as `Event.for_history()` makes it (a big log payload is cut there, not for
    live subscribers). Receives Publish, Subscribe, Unsubscribe and GetHistory (reply: the
    recent events); sends each published event to the callback of every matching subscriber.
    """

    def __init__(self, max_events: int = HISTORY_SIZE, max_bytes: int = HISTORY_BYTES) -> None:
        super().__init__()
        self._subs: dict[object, Subscribe] = {}
        self._history: deque[tuple[Event, int]] = deque()
        self._history_bytes = 0
        self._max_events, self._max_bytes = max_events, max_bytes

    def _remember(self, event: Event) -> None:
        try:
            kept = event.for_history()
            size = len(orjson.dumps(kept.to_json(), default=str))
        except Exception:  # an odd payload must not stop the bus (and with it every actor)
            logger.exception("bus: cannot size {} for the history", event.kind)
            return
        self._history.append((kept, size))
        self._history_bytes += size
        while self._history and (len(self._history) > self._max_events or self._history_bytes > self._max_bytes):
            self._history_bytes -= self._history.popleft()[1]

    def on_receive(self, message):
        match message:
            case Publish(event=event):
                self._remember(event)
                for sub in tuple(self._subs.values()):
                    if sub.types and event.kind not in sub.types:
                        continue
                    try:
                        sub.callback(event)
                    except Exception:  # one bad listener must not silence the others
                        logger.exception("event subscriber failed on {}", event.kind)
            case Subscribe():
                self._subs[message.token] = message
            case Unsubscribe(token=token):
                self._subs.pop(token, None)
            case GetHistory(reply=reply, limit=limit):
                reply([event for event, _ in self._history][-limit:])
            case _:
                logger.warning("bus: unknown message {!r}", message)


class BusClient:
    """A thin handle so publishers do not depend on the bus actor's message shapes."""

    def __init__(self, ref: pykka.ActorRef) -> None:
        self.ref = ref

    def publish(self, event: Event) -> None:
        tell(self.ref, Publish(event))  # False: shutting down, nobody is left to hear it

    def subscribe(self, token, callback, types=()) -> None:
        if not tell(self.ref, Subscribe(token, callback, frozenset(types))):
            logger.debug("bus: stopped, subscription {!r} not taken", token)

    def unsubscribe(self, token) -> None:
        tell(self.ref, Unsubscribe(token))  # False: a stopped bus has no subscribers left

    def history(self, limit: int = 100, timeout: float = 5.0) -> list:
        """Edge-code only (HTTP handlers, tools run in their own greenlet)."""
        fut = pykka.ThreadingFuture()
        if not tell(self.ref, GetHistory(fut.set, limit)):
            return []  # shutting down: no history is kept any more
        return fut.get(timeout=timeout)
