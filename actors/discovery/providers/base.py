"""ProviderActor: answers Discover by scanning in a greenlet, so its mailbox never waits on I/O."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace

import gevent
import pykka
from loguru import logger

from actors.discovery.messages import Discover, ProviderResult, fail, resolve
from actors.tells import tell

STOP_TIMEOUT = 5.0  # a scan being stopped gets this long to kill its children


class ProviderError(Exception):
    """A provider's whole scan failed or was stopped."""


@dataclass(frozen=True, slots=True)
class _ScanDone:
    """Told by the scan greenlet to its ProviderActor: the scan's result, or `error` if it failed;
    every waiting Discover gets the same."""

    result: ProviderResult | None = None
    error: str = ""


class ProviderActor(pykka.ThreadingActor):
    """Subclasses implement scan(); one scan runs at a time and every waiter gets its result.

    scan() runs in its own greenlet, outside the actor's message loop; the state it
    keeps between scans (caches) is touched by that greenlet only. Receives Discover (reply:
    ProviderResult, or ProviderError) and _ScanDone from that greenlet; sends nothing else.
    """

    provider = "provider"

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[pykka.ThreadingFuture] = []
        self._scan: gevent.Greenlet | None = None

    def scan(self) -> ProviderResult:
        raise NotImplementedError

    def on_receive(self, message):
        match message:
            case Discover(reply=reply):
                self._waiters.append(reply)
                if self._scan is None:
                    self._scan = gevent.spawn(self._run_scan)
            case _ScanDone(result=result, error=error):
                self._scan = None
                waiters, self._waiters = self._waiters, []
                for waiter in waiters:
                    if result is not None:
                        resolve(waiter, result)
                    else:
                        fail(waiter, ProviderError(error))
            case _:
                logger.warning("provider {}: unknown message {!r}", self.provider, message)

    def _run_scan(self) -> None:
        started = time.monotonic()
        try:
            result = replace(self.scan(), duration_s=time.monotonic() - started)
            done = _ScanDone(result=result)
        except Exception as exc:  # a broken provider is reported, never fatal
            logger.exception("provider {} failed", self.provider)
            done = _ScanDone(error=f"{self.provider}: {type(exc).__name__}: {exc}")
        tell(self.actor_ref, done)  # False: the provider stopped meanwhile; nobody waits for this scan

    def on_stop(self) -> None:
        if self._scan is not None:
            # bounded: a scan's `finally` kills any child process it started
            self._scan.kill(block=True, timeout=STOP_TIMEOUT)
        for waiter in self._waiters:
            fail(waiter, ProviderError(f"{self.provider}: stopped"))
        self._waiters = []
