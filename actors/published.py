"""Published[T]: an immutable snapshot that one owner replaces whole and anyone reads with no actor hop.

    box, writer = Published.create(initial)    # the owner keeps `writer`, readers get `box`

The read side (`Published`) has no way to publish: it holds no reference to its Publisher, has
no method that writes, and refuses attribute assignment; only the Publisher, which the owner
alone is handed, replaces `current`. What is published must itself be immutable (frozen
dataclasses, tuples, frozensets, MappingProxyType), so a reader can neither replace nor edit it.
"""
from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Published(Generic[T]):
    """The read side of a published snapshot: `current` is the owner's latest, read as a plain
    attribute (a slot: no call on the hot path). With `waitable`, `changed` is an event that the
    next publish sets (a greenlet that needs the next snapshot waits on it, with a timeout)."""

    __slots__ = ("current", "changed")
    current: T
    changed: Any  # gevent.event.Event, or None when not waitable

    def __init__(self) -> None:
        raise TypeError("a Published snapshot is made with Published.create(initial), which returns "
                        "the read side and the owner's Publisher")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: only its owner's Publisher publishes")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        return f"Published({self.current!r})"

    @classmethod
    def create(cls, initial: T, *, waitable: bool = False) -> tuple[Published[T], Publisher[T]]:
        """A new snapshot holding `initial`: its read side, and the Publisher that only its owner
        gets (hand `writer` to the owner actor and nothing else)."""
        box = object.__new__(cls)
        _SET_CURRENT(box, initial)
        if waitable:
            import gevent.event  # only waitable snapshots need gevent; the module stays light
            _SET_CHANGED(box, gevent.event.Event())
        else:
            _SET_CHANGED(box, None)
        return box, Publisher(box)

    @classmethod
    def constant(cls, value: T) -> Published[T]:
        """A read side that never changes (its Publisher is dropped at once): for a reader built
        on its own, as a CLI command or a test does."""
        return cls.create(value)[0]


# The slots' own setters: the only way to write a Published, used by Publisher alone.
_SET_CURRENT = Published.__dict__["current"].__set__
_SET_CHANGED = Published.__dict__["changed"].__set__


class Publisher(Generic[T]):
    """The write side of a Published snapshot, held by its one owner: `publish` replaces the
    snapshot whole (one slot store, so a reader sees the old one or the new one, never a mix);
    `current` is what it last published; `box` is the read side to hand to readers."""

    __slots__ = ("_box",)

    def __init__(self, box: Published[T]) -> None:
        self._box = box

    @property
    def box(self) -> Published[T]:
        return self._box

    @property
    def current(self) -> T:
        return self._box.current

    def publish(self, snapshot: T) -> None:
        box = self._box
        _SET_CURRENT(box, snapshot)
        waiters = box.changed
        if waiters is not None:  # wake whoever waits for this publish; the next waits on a new one
            _SET_CHANGED(box, type(waiters)())
            waiters.set()
