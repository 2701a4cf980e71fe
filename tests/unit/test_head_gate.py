"""The front's door at max_connections (actors/serve/head_gate.py): which connection gives way to
a newcomer, on a clock the test turns."""
from __future__ import annotations

from actors.serve.head_gate import SLOW_HEAD_GRACE_S, HeadGate


class Conn:
    """A connection stand-in that records being cut."""

    def __init__(self, name: str) -> None:
        self.name, self.head_cut, self.cuts = name, False, 0

    def cut_head(self) -> None:
        self.cuts += 1


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _gate(max_connections: int = 3, header_timeout: float = 10.0):
    clock = Clock()
    return HeadGate(max_connections, header_timeout, clock=clock), clock


def test_below_the_limit_everyone_is_admitted_and_nobody_cut():
    gate, _ = _gate()
    slow = Conn("slow")
    gate.waiting(slow)
    assert gate.admit(live=2) and slow.cuts == 0 and gate.cut == 0


def test_at_the_limit_the_head_waiting_longest_past_the_grace_is_cut():
    gate, clock = _gate()
    first, second, busy = Conn("first"), Conn("second"), Conn("busy")
    gate.waiting(first)
    clock.now += 0.3
    gate.waiting(second)
    gate.waiting(busy)
    gate.done(busy)  # its head arrived: it is serving a request, never cut
    clock.now += SLOW_HEAD_GRACE_S
    assert gate.admit(live=3)
    assert (first.cuts, second.cuts, busy.cuts) == (1, 0, 0) and first.head_cut
    # The cut one counts as gone until its greenlet ends: the next newcomer needs a cut of its own.
    assert gate.figures(live=4)["open"] == 3
    assert gate.admit(live=4) and second.cuts == 1
    gate.ended(first)
    gate.ended(second)
    assert gate.figures(live=2) == {"open": 2, "max": 3, "refused": 0, "waiting_for_head": 0, "slow_heads_cut": 2}


def test_at_the_limit_with_no_head_past_the_grace_the_newcomer_is_refused():
    gate, clock = _gate()
    fresh = Conn("fresh")
    gate.waiting(fresh)
    clock.now += SLOW_HEAD_GRACE_S / 2
    assert not gate.admit(live=3) and fresh.cuts == 0
    gate.done(fresh)
    clock.now += 60  # every connection busy with a whole head, however long: refused
    assert not gate.admit(live=3)
    assert gate.refused == 2 and gate.cut == 0


def test_a_keep_alive_connection_waiting_again_goes_to_the_back():
    gate, clock = _gate()
    keep, slow = Conn("keep"), Conn("slow")
    gate.waiting(keep)
    gate.waiting(slow)
    gate.done(keep)  # its request came…
    clock.now += 5
    gate.waiting(keep)  # …and it waits for the next one from now on
    clock.now += SLOW_HEAD_GRACE_S
    assert gate.admit(live=3) and (slow.cuts, keep.cuts) == (1, 0)


def test_the_grace_is_at_most_half_the_header_timeout():
    assert _gate(header_timeout=0.5)[0].grace == 0.25
    assert _gate(header_timeout=30)[0].grace == SLOW_HEAD_GRACE_S
