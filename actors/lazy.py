"""lazy: a read-only attribute of an immutable snapshot, computed from that snapshot alone on first read.

For what is too costly to build at every publish and that most snapshots never need (a search
index over 10,000 tools, a compiled JSON Schema validator per tool): the owner publishes without
it and the first reader that needs it computes it. That is safe to share only because:

- the computation is a pure function of the object's own immutable fields, fixed by the class
  (a reader cannot supply another one, nor store anything else), so whoever computes it gets the
  same value;
- it is stored by one slot store after it is complete, so nobody sees it half-built; and if two
  readers did compute it (a computation that yielded), the first store wins and both return that
  one object.

Declare the backing slot as a dataclass field `_<name>: Any = field(init=False, repr=False,
compare=False)` next to `<name> = lazy(compute)`: `dataclasses.replace` leaves it unset in the
copy, so a derived snapshot never inherits a value computed from another one.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar, overload

S = TypeVar("S")
T = TypeVar("T")


class lazy(Generic[S, T]):  # noqa: N801 - used like @property
    """A non-data descriptor: `obj.<name>` is `compute(obj)`, computed once and kept in `_<name>`."""

    def __init__(self, compute: Callable[[S], T]) -> None:
        self.compute = compute
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> lazy[S, T]: ...
    @overload
    def __get__(self, obj: S, objtype: type | None = None) -> T: ...

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        try:
            return getattr(obj, self.slot)
        except AttributeError:
            pass
        value = self.compute(obj)
        try:  # someone stored it meanwhile: theirs, so every reader holds the same object
            return getattr(obj, self.slot)
        except AttributeError:
            object.__setattr__(obj, self.slot, value)  # the snapshot is frozen to everyone else
            return value
