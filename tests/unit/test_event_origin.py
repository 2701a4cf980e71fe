"""Events across a cluster: what the bridge sends is rebuilt as the same event marked with its
origin; a local event's JSON is unchanged; the bridge ignores its own echo and never re-sends
what came from another instance."""
from __future__ import annotations

import orjson

from actors.cluster.bridge import CROSSING, EventBridge
from actors.events import kinds
from actors.events.kinds import (ApprovalDecided, ConfigReloaded, ServerLogged, ServerStateChanged, ToolsChanged,
                                 from_json)


class FakeBus:
    """Records what is published, the subscriptions made."""

    def __init__(self) -> None:
        self.published: list = []

    def publish(self, event) -> None:
        self.published.append(event)


def test_round_trip_keeps_the_event_and_adds_its_origin():
    event = ConfigReloaded(("a",), (), ("b", "c"))
    again = from_json(orjson.loads(orjson.dumps(event.to_json())), "host:1")
    assert again == ConfigReloaded(("a",), (), ("b", "c"), at=event.at, origin="host:1")
    assert again is not None and again.to_json()["origin"] == "host:1"
    assert "origin" not in event.to_json()  # a single troupe's /events is as before
    tools = from_json(ToolsChanged(frozenset({"tools"}), 3).to_json(), "x")
    assert tools is not None and tools.lists == frozenset({"tools"})


def test_unknown_kinds_and_shapes_are_none():
    assert from_json({"type": "FromTheFuture", "x": 1}, "h") is None
    assert from_json({"type": "ServerStateChanged", "server": "s"}, "h") is None  # fields missing
    assert set(kinds.KINDS) >= CROSSING


def test_what_acts_on_the_local_catalogue_stays_local():
    assert not {"ToolsChanged", "ServerLogged", "ResourceUpdated", "HealthChanged", "StartupSettled"} & CROSSING


class _Link:
    prefix = "t"

    def key(self, *parts: str) -> str:
        return ":".join(("t", *parts))


def test_the_bridge_sends_only_local_events_and_drops_its_own_echo():
    bus = FakeBus()
    bridge = EventBridge(_Link(), bus, "me")  # type: ignore[arg-type]  # no Redis needed for these paths
    bridge._on_local(ApprovalDecided("s", "approved"))
    bridge._on_local(ApprovalDecided("s", "approved", origin="other"))
    assert bridge._outbox.qsize() == 1
    echo = orjson.dumps({"origin": "me", "event": ApprovalDecided("s", "denied").to_json()})
    bridge._republish(echo)
    assert bus.published == []
    theirs = ServerStateChanged("s", "starting", "ready")
    bridge._republish(orjson.dumps({"origin": "them", "event": theirs.to_json()}))
    bridge._republish(b"not json")
    assert bus.published == [ServerStateChanged("s", "starting", "ready", at=theirs.at, origin="them")]
    assert ServerLogged("s", "info").origin == ""
