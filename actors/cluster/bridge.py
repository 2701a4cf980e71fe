"""EventBridge: the event bus of every instance joined over one Redis pub/sub channel.

Each instance publishes its own events of the kinds in CROSSING to `<prefix>:events` and
republishes on its local bus what the others sent, marked with their instance name (`origin`),
so /events, the dashboard and core_events show the cluster's events. Only events with an empty
origin are sent: a republished event is never bridged again, and an instance ignores its own.

The kinds that stay local are those a local actor acts on as if they were about its own
catalogue (ToolsChanged, ServerLogged, ResourceUpdated go to this instance's sessions;
HealthChanged feeds this instance's discovery engine; StartupSettled is this instance's start).
"""
from __future__ import annotations

import gevent
import gevent.queue
import orjson
from loguru import logger

from actors.cluster.link import LinkDown, RedisLink
from actors.events.bus import BusClient
from actors.events.kinds import Event, from_json

CROSSING = frozenset({
    "ServerStateChanged", "ServerConnected", "ServerDisconnected", "ServerRestarted", "CircuitOpened",
    "ServiceAdded", "ServiceRemoved", "ServiceUpdated", "DiscoveryCompleted", "ConfigReloaded",
    "ApprovalAwaited", "ApprovalDecided", "ToolDefinitionChanged",
})
OUTBOX_SIZE = 1000  # events waiting while Redis is slow; past this the newest are dropped, counted
RECONNECT_MAX_S = 10.0
READ_TIMEOUT_S = 1.0  # how long one get_message waits: bounds how late a stop is noticed


class EventBridge:
    """Two greenlets: the sender drains this instance's events to Redis, the listener holds the
    pub/sub subscription (its own connection) and republishes what the other instances sent.
    A Redis that goes away is retried with backoff by each; nothing here raises to its caller."""

    def __init__(self, link: RedisLink, bus: BusClient, instance: str) -> None:
        self.link, self.bus, self.instance = link, bus, instance
        self.channel = link.key("events")
        self._outbox: gevent.queue.Queue = gevent.queue.Queue(OUTBOX_SIZE)
        self._greenlets: list[gevent.Greenlet] = []
        self.sent = self.received = self.dropped = 0

    def start(self) -> "EventBridge":
        self.bus.subscribe(self, self._on_local, CROSSING)
        self._greenlets = [gevent.spawn(self._send_loop), gevent.spawn(self._listen_loop)]
        return self

    def stop(self) -> None:
        self.bus.unsubscribe(self)
        gevent.killall(self._greenlets, block=False)

    def _on_local(self, event: Event) -> None:
        """Runs in the bus actor: never blocks (a full outbox drops the event)."""
        if event.origin:
            return  # came from another instance: already everywhere
        try:
            self._outbox.put_nowait(event)
        except gevent.queue.Full:
            self.dropped += 1

    def _send_loop(self) -> None:
        delay = 0.5
        while True:
            event = self._outbox.get()
            try:
                blob = orjson.dumps({"origin": self.instance, "event": event.to_json()}, default=str)
            except TypeError:
                logger.warning("cluster: event {} cannot be sent to the others", event.kind)
                continue
            try:
                self.link.run(lambda r, b=blob: r.publish(self.channel, b))
                self.sent += 1
                delay = 0.5
            except LinkDown:
                # the others miss it: events are news, not state (state lives in its own keys)
                self.dropped += 1
                gevent.sleep(delay)
                delay = min(RECONNECT_MAX_S, delay * 2)

    def _listen_loop(self) -> None:
        delay = 0.5
        while True:
            pubsub = None
            try:
                pubsub = self.link.client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                delay = 0.5
                while True:
                    message = pubsub.get_message(timeout=READ_TIMEOUT_S)
                    if message is not None:
                        self._republish(message.get("data"))
            except gevent.GreenletExit:
                raise
            except Exception as exc:  # Redis gone or a broken socket: resubscribe, never die
                logger.warning("cluster: event subscription lost ({}: {}); again in {:g}s",
                               type(exc).__name__, exc, delay)
                gevent.sleep(delay)
                delay = min(RECONNECT_MAX_S, delay * 2)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # closing a dead connection: nothing to do
                        pass

    def _republish(self, data) -> None:
        try:
            message = orjson.loads(data)
            origin = message["origin"]
            if origin == self.instance:
                return  # our own, echoed by Redis
            event = from_json(message["event"], str(origin))
        except (orjson.JSONDecodeError, KeyError, TypeError):
            logger.warning("cluster: a malformed event on {} ignored", self.channel)
            return
        if event is not None:
            self.received += 1
            self.bus.publish(event)

    def status(self) -> dict:
        return {"sent": self.sent, "received": self.received, "dropped": self.dropped}
