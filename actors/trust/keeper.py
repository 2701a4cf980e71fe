"""TrustKeeper actor: the one owner of the approvals file and of the TrustSnapshot readers use."""
from __future__ import annotations

from dataclasses import dataclass

import gevent
import pykka
from loguru import logger

from ..bus import BusClient
from ..events import ApprovalDecided, ToolDefinitionChanged
from . import ledger
from .ledger import Ledger, LedgerError, TrustSnapshot
from .messages import Decide, PinFirstSight, ReportWithheld, TrustChanged, WatchTrust

POLL_INTERVAL = 1.0  # seconds between stats of the file: `troupe approve` is seen within ~1 s


class TrustBox:
    """Holds the current TrustSnapshot; only the TrustKeeper replaces it, anyone reads `.current`."""

    def __init__(self, current: TrustSnapshot | None = None) -> None:
        self.current = current or TrustSnapshot()


@dataclass(frozen=True, slots=True)
class _Poll:
    """Look at the file's stamp (from the poll greenlet)."""


class TrustKeeper(pykka.ThreadingActor):
    """Owns the approvals file: reloads it when another process (`troupe approve`) changes it,
    writes operator decisions, first-sight pins and withheld definitions into it, and
    publishes each new TrustSnapshot to its box, then tells WatchTrust subscribers.

    Receives: Decide (reply: the entry), PinFirstSight, ReportWithheld, WatchTrust, _Poll.
    Sends: TrustChanged to subscribers; ApprovalDecided and ToolDefinitionChanged to the bus.
    A file that cannot be read keeps the last good snapshot (at start: nothing approved),
    so a broken file never approves anything.
    """

    def __init__(self, path: str, box: TrustBox, bus: BusClient | None = None,
                 poll_interval: float = POLL_INTERVAL) -> None:
        super().__init__()
        self.ledger = Ledger(path)
        self.box, self.bus = box, bus
        self._interval = poll_interval
        self._stamp: tuple | None = None
        self._version = 0
        self._watchers: list[pykka.ActorRef] = []
        self._poller: gevent.Greenlet | None = None

    def on_start(self) -> None:
        self._reload()
        if self._interval > 0:
            self._poller = gevent.spawn(self._poll_loop)

    def on_stop(self) -> None:
        if self._poller is not None:
            self._poller.kill(block=False)

    def _poll_loop(self) -> None:
        while True:
            gevent.sleep(self._interval)
            try:
                self.actor_ref.tell(_Poll())
            except pykka.ActorDeadError:
                return

    def on_receive(self, message):
        match message:
            case _Poll():
                self._reload()
            case WatchTrust(ref=ref):
                self._watchers.append(ref)
            case Decide():
                self._decide(message)
            case PinFirstSight(identity=identity, name=name, items=items):
                self._write(lambda data: ledger.pin_first_sight(data, identity, name, items))
            case ReportWithheld():
                self._withheld(message)
            case _:
                logger.warning("trust: unknown message {!r}", message)

    # ---------------------------------------------------------------- file

    def _reload(self) -> None:
        try:
            stamp = self.ledger.stamp()
            if stamp == self._stamp and self._version:
                return
            data = self.ledger.read()
        except LedgerError as exc:
            logger.warning("trust: {}; keeping the last good approvals", exc)
            return
        self._stamp = stamp
        self._publish(data)

    def _write(self, change):
        """Apply a change to the file and publish; a write that fails is logged and re-raised."""
        try:
            result, data = self.ledger.update(change)
            self._stamp = self.ledger.stamp()
        except (LedgerError, OSError) as exc:
            logger.error("trust: cannot write {}: {}", self.ledger.path, exc)
            raise
        self._publish(data)
        return result

    def _publish(self, data: dict) -> None:
        self._version += 1
        self.box.current = ledger.snapshot(data, self._version)
        for ref in list(self._watchers):
            try:
                ref.tell(TrustChanged(self._version))
            except pykka.ActorDeadError:
                self._watchers.remove(ref)

    # ---------------------------------------------------------------- operator acts

    def _decide(self, msg: Decide) -> None:
        try:
            entry = self._write(lambda data: dict(ledger.decide(data, msg.identity, msg.name, msg.decision,
                                                                msg.provenance, msg.launch)))
        except Exception as exc:
            msg.reply.set_exception((type(exc), exc, None))
            return
        logger.info("trust: {} {}", msg.decision, msg.name)
        if self.bus is not None:
            self.bus.publish(ApprovalDecided(msg.name, msg.decision))
        msg.reply.set(entry)

    def _withheld(self, msg: ReportWithheld) -> None:
        before = self.box.current.withheld.get(msg.identity) or {}
        fresh = [(kind, item, change) for kind, items in msg.withheld.items() for item, change in items.items()
                 if (before.get(kind) or {}).get(item, {}).get("digest") != change["digest"]]
        gone = any(item not in (msg.withheld.get(kind) or {}) for kind in ledger.KINDS
                   for item in (before.get(kind) or {}))
        if not fresh and not gone:
            return  # transitions only: the same withheld set is neither rewritten nor announced
        try:
            self._write(lambda data: ledger.withhold(data, msg.identity, msg.name, msg.withheld))
        except Exception:
            return  # logged by _write; the registry withholds regardless
        for kind, item, change in fresh:
            logger.bind(server=msg.name).warning("{} {!r} is {}; withheld until `troupe approve {}`",
                                                 kind[:-1], item, change["kind"], msg.name)
            if self.bus is not None:
                self.bus.publish(ToolDefinitionChanged(msg.name, item, kind, change["kind"], change["diff"]))
