"""Snapshots are immutable in fact: a reader of a Published snapshot cannot publish, what readers
derive from a catalogue is built with it (or is a lazy attribute, computed once and shared), and
messages between actors carry no shared mutable payload."""
from __future__ import annotations

import dataclasses
import gc
import importlib
import typing
from types import MappingProxyType

import pytest

from actors.catalogue import views
from actors.catalogue.snapshot import Catalogue, Entry, ServerLists, build
from actors.published import Published, Publisher
from actors.trust.messages import PinFirstSight, ReportWithheld


def _reachable(root, limit: int = 10_000) -> list:
    """Every object reachable from `root` by references (bounded), as gc sees them."""
    seen, todo, out = {id(root)}, [root], []
    while todo and len(out) < limit:
        obj = todo.pop()
        out.append(obj)
        for ref in gc.get_referents(obj):
            if id(ref) not in seen and not isinstance(ref, type):
                seen.add(id(ref))
                todo.append(ref)
    return out


def test_a_reader_cannot_publish():
    box, writer = Published.create(("first",))
    assert box.current == ("first",) and writer.current == ("first",) and writer.box is box
    for attempt in (lambda: setattr(box, "current", ("mine",)), lambda: delattr(box, "current"),
                    lambda: setattr(box, "publish", None)):
        with pytest.raises(AttributeError):
            attempt()
    assert not hasattr(box, "publish") and not hasattr(box, "__dict__")  # slots only: nothing to add
    with pytest.raises(TypeError):
        Published()  # only create() makes one, and it hands the Publisher to its caller alone
    # The write handle is not reachable from the read side: nothing the reader holds leads to it.
    assert not any(isinstance(obj, Publisher) for obj in _reachable(box))
    writer.publish(("second",))
    assert box.current == ("second",)


def test_a_waitable_snapshot_wakes_whoever_waits_for_the_next_publish():
    box, writer = Published.create(0, waitable=True)
    waiting = box.changed
    assert not waiting.is_set()
    writer.publish(1)
    assert waiting.is_set() and box.current == 1
    assert box.changed is not waiting and not box.changed.is_set()  # the next publish has its own
    assert Published.create(0)[0].changed is None


def test_a_constant_snapshot_has_no_publisher_anywhere():
    box = Published.constant("fixed")
    gc.collect()
    assert box.current == "fixed" and not any(isinstance(o, Publisher) for o in _reachable(box))


def _lists():
    reads = {"readOnlyHint": True}
    return {"gh": ServerLists("gh", "gh", tools=({"name": "get_issue", "annotations": reads,
                                                 "inputSchema": {"type": "object", "required": ["n"]}},
                                                {"name": "create_issue"}),
                              prompts=({"name": "review"},), resources=({"uri": "gh://readme"},)),
            "fs": ServerLists("fs", "fs", tools=({"name": "read", "annotations": reads},))}


def test_views_and_digests_are_built_with_the_snapshot_not_by_readers():
    profile = views.Profile("ro", read_only=True)
    published = views.with_views(build(_lists(), "__", 1), (profile,))
    built = published.views[profile]
    # Two readers (two sessions of the profile) get the very object the builder made.
    assert views.view(published, profile) is built and views.view(published, views.Profile("ro", read_only=True)) is built
    assert set(published.digests) == {"tools", "prompts", "resources", "resourceTemplates"}
    assert built.digests["tools"] != published.digests["tools"]  # each view its own, at construction
    # No field of a snapshot is a mutable container a reader could fill.
    for snapshot in (published, built):
        for f in dataclasses.fields(snapshot):
            value = getattr(snapshot, f.name, None)
            assert not isinstance(value, (dict, list, set)), f.name
    assert not hasattr(published, "derived") and not hasattr(published, "__dict__")


def test_lazy_values_are_computed_once_shared_and_never_inherited_by_a_copy():
    cat = build(_lists(), "__", 1)
    index = cat.search_index
    assert cat.search_index is index  # a second reader gets the first one's object
    entry = cat.tool("gh__get_issue")
    assert entry is not None
    validator = cat.validator(entry)
    assert validator is entry.validator and cat.validator(entry) is validator
    view = views.view(cat, views.Profile("gh", servers=frozenset({"gh"})))
    assert view.tool("gh__get_issue") is entry and view.validator(entry) is validator  # one per entry, all views
    copy = dataclasses.replace(cat, version=2)
    assert copy.search_index is not index  # a derived snapshot computes its own from its own fields
    # Refused (FrozenInstanceError, or TypeError from a slots dataclass's frozen __setattr__).
    for name in ("search_index", "_search_index", "digests"):
        with pytest.raises((dataclasses.FrozenInstanceError, TypeError)):
            setattr(cat, name, None)
    assert cat.search_index is index


def test_a_catalogue_has_digests_whoever_builds_it():
    empty = Catalogue()
    assert empty.digests["tools"] == Catalogue().digests["tools"]  # content, not identity
    one = Entry("a", "s", "a", MappingProxyType({"name": "a"}))
    assert Catalogue(tools=(one,)).digests["tools"] != empty.digests["tools"]


MESSAGE_MODULES = ("actors.messages", "actors.auth.messages", "actors.caching.messages", "actors.discovery.messages",
                   "actors.trust.messages", "actors.workflows.messages", "actors.events.kinds")
MUTABLE = (dict, list, set, bytearray)


def _message_classes():
    for name in MESSAGE_MODULES:
        module = importlib.import_module(name)
        for value in vars(module).values():
            if dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == name:
                yield value


def test_every_message_is_frozen_and_declares_no_mutable_container():
    classes = list(_message_classes())
    assert len(classes) > 40  # the scan found the protocol
    for cls in classes:
        params = cls.__dataclass_params__
        assert params.frozen, cls.__name__
        hints = typing.get_type_hints(cls, vars(importlib.import_module(cls.__module__)))
        for f in dataclasses.fields(cls):
            hint = hints.get(f.name)
            origin = typing.get_origin(hint) or hint
            assert origin not in MUTABLE, f"{cls.__name__}.{f.name} is declared {hint}"


def test_trust_payloads_travel_encoded_so_the_keeper_gets_its_own_copy():
    definition = {"name": "t", "inputSchema": {"type": "object", "required": ["a"]}}
    pins = PinFirstSight.of("stdio:x", "x", {"tools": {"t": ("d1", MappingProxyType(definition))}})
    definition["inputSchema"]["required"].append("b")  # the Registry's dict changes after the tell
    mine = pins.items
    assert mine == {"tools": {"t": ["d1", {"name": "t", "inputSchema": {"type": "object", "required": ["a"]}}]}}
    mine["tools"]["t"][1]["name"] = "changed"
    assert pins.items["tools"]["t"][1]["name"] == "t"  # every decode is a fresh copy
    assert isinstance(pins.items_json, bytes)
    report = ReportWithheld.of("stdio:x", "x", {"tools": {"t": {"digest": "d2", "kind": "changed"}}})
    assert report.withheld["tools"]["t"]["digest"] == "d2" and report.withheld is not report.withheld
