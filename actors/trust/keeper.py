"""TrustKeeper actor: the one owner of the approvals file and of the TrustSnapshot readers use."""
from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import gevent
import pykka
from loguru import logger

from actors.events.bus import BusClient
from actors.events.kinds import ApprovalDecided, ToolDefinitionChanged
from actors.published import Publisher
from actors.trust import ledger, running
from actors.trust import provenance as trust
from actors.trust.ledger import Ledger, LedgerError, TrustSnapshot
from actors.trust.messages import (Decide, KeepListing, PinFirstSight, ReportWithheld, ServersSeen, TrustChanged,
                                   WatchTrust)
from actors.tells import tell

POLL_INTERVAL = 1.0  # seconds between stats of the file: `troupe approve` is seen within ~1 s
# First-sight pins and withheld sets are written together after this delay: 50 servers
# arriving at start-up cost one rewrite of the file, not 50.
WRITE_DELAY = 0.2


@dataclass(frozen=True, slots=True)
class _Poll:
    """Look at the file's stamp (from the poll greenlet)."""


@dataclass(frozen=True, slots=True)
class _Flush:
    """Write the changes gathered since the last write (from the write timer)."""


class TrustKeeper(pykka.ThreadingActor):
    """Owns the approvals file: reloads it when another process (`troupe approve`) changes it,
    writes operator decisions, first-sight pins and withheld definitions into it, and
    publishes each new TrustSnapshot (it alone holds the Publisher of the Published[TrustSnapshot]
    everyone else reads), then tells WatchTrust subscribers.

    With `record` it also keeps this process's running record (actors/trust/running.py) beside
    the file: the name, identity and trust state of each server this troupe has (from ServersSeen),
    rewritten when one changes and removed at stop, for `troupe approve NAME` to find.

    Receives: Decide (reply: the entry), PinFirstSight, ReportWithheld, KeepListing (an on-demand
    server's full listing, served while it is stopped), WatchTrust, ServersSeen,
    and _Poll and _Flush from its own poll greenlet and write timer.
    Sends: TrustChanged to subscribers; ApprovalDecided and ToolDefinitionChanged to the bus.
    A file that cannot be read keeps the last good snapshot (at start: nothing approved),
    so a broken file never approves anything.
    """

    def __init__(self, path: str, box: Publisher[TrustSnapshot], bus: BusClient | None = None,
                 poll_interval: float = POLL_INTERVAL, ledger: Any = None, record: bool = False,
                 config_file: str | None = None, approve_config: str | None = None) -> None:
        super().__init__()
        self._path = path
        # the running record: written only by a runtime that serves (record), naming its config file
        self._record, self._config_file = record, config_file
        self._approve_config = approve_config  # the --config its approval hints name (trust.approve_hint)
        self._identities: dict[str, tuple] = {}  # server name → (its ServerConfig, identity, shown launch)
        self._recorded: dict | None = None  # the servers as last written to the record
        self._record_path = running.record_path(path, secrets.token_hex(4))
        # A cluster passes its RedisLedger (same stamp/read/update): Redis replaces the file then.
        self.ledger = ledger or Ledger(path)
        self.box, self.bus = box, bus
        self._interval = poll_interval
        self._stamp: tuple | None = None
        self._version = 0
        self._watchers: list[pykka.ActorRef] = []
        self._poller: gevent.Greenlet | None = None
        # (what, identity) → change(data), written at the next flush
        self._queued: dict[tuple, Callable[[Any], Any]] = {}
        self._flush_timer: gevent.Greenlet | None = None
        self._unwritten: dict[str, Mapping] = {}  # identity → withheld set queued, not yet in the snapshot
        self._announce: list = []  # ToolDefinitionChanged events of the queued changes

    def on_start(self) -> None:
        self._reload()
        if self._record:
            running.prune(self._path)  # records a killed troupe left behind
        if self._interval > 0:
            self._poller = gevent.spawn(self._poll_loop)

    def on_stop(self) -> None:
        if self._poller is not None:
            self._poller.kill(block=False)
        if self._flush_timer is not None:
            self._flush_timer.kill(block=False)
        # Pins seen this run are kept. Its lock, if another process holds it, is waited for off the
        # hub (actors/off_hub.py): a holder slower than the runtime's stop deadline loses this write.
        self._flush()
        if self._recorded is not None:
            try:
                running.remove(self._record_path)
            except OSError as exc:
                logger.warning("trust: cannot remove {}: {}", self._record_path, exc)

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
            case _Flush():
                self._flush_timer = None
                self._flush()
            case WatchTrust(ref=ref):
                self._watchers.append(ref)
            case Decide():
                self._decide(message)
            case PinFirstSight(identity=identity, name=name, items=items, extend=extend):
                key = ("pin+", identity, message.items_json) if extend else ("pin", identity)
                self._queue(key, lambda data: ledger.pin_first_sight(data, identity, name, items, extend))
            case ReportWithheld():
                self._withheld(message)
            case KeepListing(identity=identity, name=name):
                listing = message.listing  # decoded here: the keeper's own copy
                self._queue(("listing", identity), lambda data: ledger.keep_listing(data, identity, name, listing))
            case ServersSeen(directory=directory):
                self._servers_seen(directory)
            case _:
                logger.warning("trust: unknown message {!r}", message)

    # ---------------------------------------------------------------- file

    def _queue(self, key: tuple, change) -> None:
        self._queued[key] = change
        if self._flush_timer is None:
            self._flush_timer = gevent.spawn_later(WRITE_DELAY, self._tell_flush)

    def _tell_flush(self) -> None:
        tell(self.actor_ref, _Flush())  # False: it stopped meanwhile; on_stop wrote what was queued

    def _flush(self) -> None:
        if not self._queued:
            return
        changes, self._queued, self._unwritten = list(self._queued.values()), {}, {}
        events, self._announce = self._announce, []
        try:
            self._write(lambda data: [change(data) for change in changes])
        except Exception:
            pass  # logged by _write; the registry keeps screening with what it told us
        for event in events if self.bus is not None else ():
            assert self.bus is not None  # the loop runs only with a bus
            self.bus.publish(event)

    def _reload(self) -> None:
        if self._queued:
            return  # our own changes go first; the next poll reads what others wrote on top
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
        self.box.publish(ledger.snapshot(data, self._version))
        for ref in list(self._watchers):
            try:
                ref.tell(TrustChanged(self._version))
            except pykka.ActorDeadError:
                self._watchers.remove(ref)

    # ---------------------------------------------------------------- operator acts

    def _decide(self, msg: Decide) -> None:
        self._flush()  # what was seen before the decision is in the file before it
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
        withheld = msg.withheld  # decoded once: the keeper's own copy, shared with nobody
        # what was last reported counts, written yet or not: the same set is announced once
        before = self._unwritten.get(msg.identity) or self.box.current.withheld.get(msg.identity) or {}
        fresh = [(kind, item, change) for kind, items in withheld.items() for item, change in items.items()
                 if (before.get(kind) or {}).get(item, {}).get("digest") != change["digest"]]
        gone = any(item not in (withheld.get(kind) or {}) for kind in ledger.KINDS
                   for item in (before.get(kind) or {}))
        if not fresh and not gone:
            return  # transitions only: the same withheld set is neither rewritten nor announced
        self._unwritten[msg.identity] = withheld
        self._queue(("withheld", msg.identity), lambda data: ledger.withhold(data, msg.identity, msg.name,
                                                                           withheld))
        for kind, item, change in fresh:
            logger.bind(server=msg.name).warning("{} {!r} is {}; withheld until `{}`", kind[:-1], item,
                                                 change["kind"], trust.approve_hint(msg.name, self._approve_config))
            # announced once the snapshot holds it: a reader the event wakes finds it there
            self._announce.append(ToolDefinitionChanged(msg.name, item, kind, change["kind"], change["diff"]))

    # ---------------------------------------------------------------- the running record

    def _servers_seen(self, directory) -> None:
        if not self._record:
            return
        identities, servers = {}, {}
        for name, view in directory.servers.items():
            known = self._identities.get(name)
            if known is None or known[0] is not view.config:  # computed once per config (it may stat PATH)
                known = (view.config, trust.identity_key(view.config), trust.shown_launch(view.config))
            identities[name] = known
            state = view.state.value if view.state.value in running.GATED else running.ALLOWED
            servers[name] = {"identity": known[1], "state": state, "provenance": view.config.provenance,
                             "launch": known[2], "file": view.config.origin_file}
        self._identities = identities
        if servers == self._recorded:
            return  # only a trust state or an identity changing rewrites it, not ready ⇄ degraded
        try:
            running.write(self._record_path, self._path, self._config_file, servers)
        except OSError as exc:
            logger.warning("trust: cannot write {}: {}", self._record_path, exc)
            return
        self._recorded = servers
