#!/usr/bin/env python
"""How long the TaskKeeper's own work holds its greenlet with many tasks, against the hub budget.

The keeper's clock ticks every 0.5 s: it polls the watched tasks of modern servers (one poll in
flight per task) and, every sweep, looks for tasks past their TTL or their max_duration. A task's
change is told to the sessions watching it. Each of these must stay far below the ~50 ms a turn
may hold the hub (DESIGN.md), at the scale the caps allow: N watched relayed tasks (default
10,000), each followed by one listen of its own, plus W sessions watching one task.

Prints, for each, the time of one turn and its ratio to the 50 ms budget, with the same turn at
N = 100 measured in this run as the baseline (its growth: about linear is expected).

Usage: python scripts/bench_task_tick.py [--tasks 10000] [--watchers 1000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.protocol.request_state import StateSealer  # noqa: E402
from actors.settings.model import TasksConfig  # noqa: E402
from actors.tasks import wire  # noqa: E402
from actors.tasks.ids import TaskIds  # noqa: E402
from actors.tasks.keeper import TaskKeeper  # noqa: E402
from actors.tasks.records import Record  # noqa: E402

BUDGET_MS = 50.0


class Sink:
    """Stands for a Connection or a Session: takes every tell, answers none (polls stay in flight)."""

    def __init__(self, urn: str) -> None:
        self.actor_urn, self.told = urn, 0

    def tell(self, _message) -> None:
        self.told += 1


def _keeper(n: int, watchers: int) -> tuple[TaskKeeper, Record]:
    keeper = TaskKeeper(TasksConfig(), TaskIds(StateSealer(lambda: b"k" * 32), 3600))
    conn = Sink("conn")
    first = None
    for i in range(n):
        record = Record(f"r{i}", "srv", wire.MODERN, "client:a", "client:a", minted=False)
        record.target, record.upstream_id, record.poll_ms = conn, f"up-{i}", 0
        keeper.records.add(record)
        keeper.records.issue(record, f"troupe1.t{i}")
        keeper._watch(Sink(f"session-{i}"), (record.task_id,))
        first = first or record
    assert first is not None
    for w in range(watchers):
        keeper._watch(Sink(f"watcher-{w}"), (first.task_id,))
    return keeper, first


def _ms(fn, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        runs.append((time.perf_counter() - began) * 1000)
    return statistics.median(runs)


def measure(n: int, watchers: int, repeat: int) -> dict[str, float]:
    keeper, first = _keeper(n, watchers)
    out = {"first tick (a poll sent per task)": _ms(lambda: keeper.relaying.poll(), 1)}
    out["steady tick (every poll in flight)"] = _ms(lambda: keeper.relaying.poll(), repeat)
    out["sweep (TTL and max_duration)"] = _ms(lambda: (keeper.records.expired(time.time()),
                                                        keeper.calls.overdue(time.monotonic())), repeat)
    out["one change told to its watchers"] = _ms(lambda: keeper.changed(first), repeat)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--watchers", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base = measure(100, args.watchers // 100, args.repeat)
    big = measure(args.tasks, args.watchers, args.repeat)
    print(f"{'turn of the task keeper':44} {'N=100 ms':>9} {f'N={args.tasks} ms':>12} {'growth':>7} "
          f"{'of 50 ms':>9}  met")
    worst = 0.0
    for (name, small), (_name, large) in zip(base.items(), big.items()):
        share = large / BUDGET_MS
        worst = max(worst, share)
        print(f"{name:44} {small:9.2f} {large:12.2f} {large / max(small, 1e-6):6.0f}× {share:8.2f}×  "
              f"{'PASS' if share <= 1.0 else 'MISS'}")
    print(f"(a change is told to 1 + {args.watchers} sessions at N={args.tasks}, 1 + {args.watchers // 100} at N=100)")
    print(f"worst turn: {worst:.2f}× the hub budget")
    return 0


if __name__ == "__main__":
    sys.exit(main())
