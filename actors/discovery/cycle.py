"""The greenlets around a DiscoveryEngine, and what they tell it: one discovery cycle's wait
for every provider under a single deadline (CycleDone), the periodic re-discovery (Tick), and
the file watcher's news (FilesChanged). They wait so that the engine's actor never does."""
from __future__ import annotations

import time
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

import gevent
import pykka
from actors.tells import tell


@dataclass(frozen=True, slots=True)
class CycleDone:
    """Told by the collect greenlet to its DiscoveryEngine: cycle `cycle` is over; `results` holds
    the providers that answered, `failed` one line for each that did not (in time)."""

    cycle: int
    results: Mapping  # provider → ProviderResult
    failed: Mapping  # provider → one-line reason
    started_at: float
    duration_s: float


@dataclass(frozen=True, slots=True)
class FilesChanged:
    """Told by the file watcher to its DiscoveryEngine: these watched files or PATH directories changed."""

    paths: tuple


@dataclass(frozen=True, slots=True)
class Tick:
    """Told by the periodic greenlet to its DiscoveryEngine every `interval` seconds: discover again."""


def collect(engine: pykka.ActorRef, cycle: int, futures: dict, deadline: float, failed: dict) -> None:
    """Wait for every provider's answer with one deadline (a greenlet, never the actor)."""
    started, t0 = time.time(), time.monotonic()
    results = {}
    for name, future in futures.items():
        try:
            results[name] = future.get(timeout=max(0.0, deadline - (time.monotonic() - t0)))
        except pykka.Timeout:
            failed[name] = f"{name}: no answer within {deadline:g}s; its last results are kept"
        except Exception as exc:
            failed[name] = str(exc) or f"{name}: {type(exc).__name__}"
    # False: the engine stopped meanwhile, and its waiters were failed when it did.
    tell(engine, CycleDone(cycle, MappingProxyType(results), MappingProxyType(failed), started,
                           time.monotonic() - t0))


def tick_every(engine: pykka.ActorRef, interval: float) -> None:
    """Tell the engine Tick every `interval` seconds until it is gone (a greenlet)."""
    while True:
        gevent.sleep(interval)
        if not tell(engine, Tick()):
            return
