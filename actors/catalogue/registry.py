"""Registry actor: the only writer of the catalogue; publishes immutable snapshots."""
from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from types import MappingProxyType

import gevent
import orjson
import pykka
from loguru import logger

from actors.catalogue import snapshot as catalogue, views
from actors.events.bus import BusClient
from actors.catalogue.snapshot import Catalogue, ServerLists
from actors.events.kinds import ToolsChanged
from actors.messages import DropServer, PublishServer
from actors.published import Published, Publisher
from actors.slicing import Slices, never
from actors.tells import tell
from actors.trust import provenance as trust
from actors.trust.ledger import KINDS, Pinned, TrustSnapshot
from actors.tasks import wire as task_wire
from actors.trust.messages import KeepListing, PinFirstSight, ReportWithheld, TrustChanged
from actors.trust.pinning import digests, screen

LIST_CHANGED_DEBOUNCE = 0.05  # coalesce bursts (N servers arriving at once) into one notice
# Screening a listing and building a snapshot loop over every tool (~120 ms of CPU at 10,000
# tools, seconds at 50,000): above this many tools they run in slices (actors/slicing.py),
# yielding to the hub between them, so no other client's call waits behind a big server. Readers
# keep the previous snapshot meanwhile: the next is published whole, in one store. Below it the
# work is short and done in one turn, as a server's readiness (told to the Supervisor after its
# lists) then finds its tools published.
YIELD_ABOVE_TOOLS = 2000
# Trust on first sight covers a server's first start, not only its first listing: a server
# that adds tools once it has seen troupe's capabilities (server-everything adds its
# sampling/elicitation/roots tools after `initialized`) lists them a moment later. Tools it
# adds this soon after the first sight, in this run, before any client's request reached it
# (PublishServer.untouched), are pinned with it. A definition that changes is withheld as
# always, and so is a tool added later or after a call (a rug pull answers a call).
FIRST_SIGHT_WINDOW = 10.0
# A storm of real changes from one server must not make the hub rebuild all the time: after a
# server's listing is screened and built, its next one waits until that work's cost is at most
# REBUILD_SHARE of the time since (within these bounds); listings arriving meanwhile are held,
# the latest wins. A listing after a calm spell is taken at once: callers see new tools promptly.
REBUILD_SHARE = 0.1
REPUBLISH_AFTER = (0.1, 2.0)  # seconds: the shortest and longest hold


class _Flush:
    """Told by the debounce timer to its Registry: publish the gathered ToolsChanged notice now."""
    pass


class _PublishDue:
    """Told by the Registry to itself after taking a listing: build and publish one snapshot for
    every listing taken before it (a burst: many servers starting at once), then tell each
    listing's waiter. A message before it that needs them published (the ToolsChanged notice's
    _Flush, a TrustChanged or DropServer, which rebuild) publishes them first."""


@dataclass(frozen=True, slots=True)
class _Release:
    """Told by a hold timer to its Registry: take this server's latest held listing now."""

    server: str


class Registry(pykka.ThreadingActor):
    """The only writer of the catalogue; owns each server's last listing and its screened lists.

    `reserved` names troupe's own tools (the meta-tools and core tools, from its creator):
    a server's tool that would take one is renamed and the collision reported.

    Receives PublishServer (a connection's full lists), DropServer, TrustChanged, _Flush
    and _Release from its own timers (a server's listings that come faster than their
    rebuilds' cost allows are held, the latest wins: REBUILD_SHARE), and _PublishDue from itself
    (the listings in one burst of the mailbox are published in one snapshot).
    Screens each server's tools and prompts against their pins (a changed or new
    definition is withheld, not shown), builds a new immutable Catalogue, with the view of
    each configured profile and each list's digest, and publishes it once the burst of listings
    it came in is read (it alone holds the catalogue's Publisher); debounces the ToolsChanged
    notice to the bus. Tells the TrustKeeper what to pin on first sight (PinFirstSight), what it
    withholds (ReportWithheld) and an on-demand server's full listing to serve while it is
    stopped (KeepListing).
    """

    def __init__(self, writer: Publisher[Catalogue], bus: BusClient, separator: str = "__", *,
                 trust_box: Published[TrustSnapshot] | None = None, keeper: pykka.ActorRef | None = None,
                 reserved: frozenset = frozenset(), profiles: tuple = (), approve_config: str | None = None) -> None:
        super().__init__()
        # how a withheld item's message names the command that accepts it (trust.approve_hint)
        self._approve = functools.partial(trust.approve_hint, config_file=approve_config)
        self.writer, self.bus, self.separator = writer, bus, separator
        self.reserved = frozenset(reserved)  # troupe's own tool names: no server's tool gets one
        self.trust, self.keeper = trust_box or Published.constant(TrustSnapshot()), keeper
        self.profiles = tuple(profiles)  # config.profiles: fixed for the runtime's life (reload keeps them)
        self._published: dict[str, tuple] = {}  # server → (PublishServer as listed, its digests)
        self._first_sight: dict[str, Pinned] = {}  # identity → pins told to the keeper, until its snapshot has them
        self._sighted: dict[str, float] = {}  # identity → when it was first pinned in this run (monotonic)
        self._lists: dict[str, ServerLists] = {}
        self._changed: set[str] = set()
        self._flush_timer: gevent.Greenlet | None = None
        self._held: dict[str, PublishServer] = {}  # server → its latest listing, waiting for its hold
        self._holds: dict[str, gevent.Greenlet] = {}  # server → the timer that ends its hold
        self._next_at: dict[str, float] = {}  # server → when its next listing may be taken (monotonic)
        self._kept: dict[str, bytes] = {}  # identity → the on-demand listing last told to the keeper
        self._entries: dict = {}  # the last build's entries, for the next to reuse (catalogue.build)
        self._publish_told = False  # a _PublishDue is in the mailbox
        # (server, its screening's cost, waiters) of each listing taken since the last snapshot, in
        # which a listing that changed lists waits: a _PublishDue (or an earlier rebuild) publishes them
        self._due: list[tuple[str, float, list]] = []

    def on_receive(self, message):
        match message:
            case PublishServer():
                self._listing(message)
            case _Release(server=server):
                self._holds.pop(server, None)
                held = self._held.pop(server, None)
                if held is not None:
                    self._take(held)
            case TrustChanged():
                changed: set[str] = set()
                pause = self._pause()
                for published, sums in list(self._published.values()):
                    changed |= self._screen(published, sums, report=False, pause=pause)
                self._mark(changed)
            case DropServer(server=server):
                self._unhold(server)
                self._next_at.pop(server, None)
                self._published.pop(server, None)
                old = self._lists.pop(server, None)
                if old is not None:
                    self._mark(_diff(old, ServerLists(server, old.prefix)))
            case _Flush():
                self._flush_timer = None
                if self._due:  # the notice names a version that has them
                    self._publish()
                self._rebuild()
            case _PublishDue():
                self._publish_told = False
                if self._due:
                    self._publish()
            case _:
                logger.warning("registry: unknown message {!r}", message)

    def _listing(self, msg: PublishServer) -> None:
        """A server's new lists: taken now, or held (the latest only) until its hold ends. A first
        listing (its Connection waits for it to be published to report the server ready) is
        never held: it replaces whatever an earlier generation left held."""
        if msg.on_published is not None:
            self._unhold(msg.server)
            self._take(msg)
            return
        wait = self._next_at.get(msg.server, 0.0) - time.monotonic()
        if msg.server not in self._holds and wait <= 0:
            self._take(msg)
            return
        self._held[msg.server] = msg  # never one with a waiter: those were taken above
        if msg.server not in self._holds:
            self._holds[msg.server] = gevent.spawn_later(wait, self._tell_release, msg.server)

    def _take(self, msg: PublishServer) -> None:
        """Screen a listing now; its snapshot is built once the burst it came in is read (_PublishDue):
        50 servers starting made 50 builds of every tool so far, now one per burst."""
        started = time.monotonic()
        pause = Slices() if len(msg.tools) > YIELD_ABOVE_TOOLS else never
        sums = digests({"tools": msg.tools, "prompts": msg.prompts}, pause) if msg.pin else None
        self._published[msg.server] = (msg, sums)
        if msg.keep:
            self._keep(msg)
        changed = self._screen(msg, sums, report=True, pause=pause)  # may publish (instructions alone)
        cost = time.monotonic() - started
        # The server's next listing waits for this one's cost at once, not only once it is published:
        # listings it sends meanwhile, in the same burst, are held (the latest wins), not screened.
        self._hold_after(msg.server, cost)
        waiters = [msg.on_published] if msg.on_published is not None else []
        pending = bool(self._due)  # an earlier listing of this burst changed lists: a snapshot is due
        self._due.append((msg.server, cost, waiters))
        if changed:
            self._changed |= changed
            self._debounce_notice()
        if not (changed or pending):
            self._publish_done(0.0)  # nothing to build: its waiters are told at once
        elif not self._publish_told:
            self._publish_told = tell(self.actor_ref, _PublishDue())
            if not self._publish_told:  # stopping: publish now, and keep every waiter's answer exact
                self._publish()

    def _publish_done(self, build_cost: float) -> None:
        """After a snapshot holds every listing taken: each one's waiters are told (its Connection
        then reports the server ready), and its next listing may come once its cost, the build's
        included, allows."""
        due, self._due = self._due, []
        for server, cost, waiters in due:
            if server in self._published:  # not dropped meanwhile
                self._hold_after(server, cost + build_cost)
            for published in waiters:
                published()

    def _hold_after(self, server: str, cost: float) -> None:
        low, high = REPUBLISH_AFTER
        self._next_at[server] = time.monotonic() + min(high, max(low, cost / REBUILD_SHARE))

    def _keep(self, msg: PublishServer) -> None:
        """An on-demand server's listing, as listed (unscreened: a withheld tool stays withheld when it
        is served again), kept by the TrustKeeper when it differs from what is kept."""
        if not msg.identity or self.keeper is None:
            return
        blob = orjson.dumps({"tools": msg.tools, "resources": msg.resources, "templates": msg.templates,
                             "prompts": msg.prompts, "capabilities": msg.capabilities,
                             "instructions": msg.instructions}, default=dict, option=orjson.OPT_SORT_KEYS)
        if self._kept.get(msg.identity, self.trust.current.listings.get(msg.identity)) != blob:
            self._kept[msg.identity] = blob
            self._tell_keeper(KeepListing(msg.identity, msg.server, blob))

    def _unhold(self, server: str) -> None:
        self._held.pop(server, None)
        timer = self._holds.pop(server, None)
        if timer is not None:
            timer.kill(block=False)

    def _tell_release(self, server: str) -> None:
        tell(self.actor_ref, _Release(server))  # False: it stopped meanwhile; the listing has nobody to serve

    def _screen(self, msg: PublishServer, sums, report: bool, pause=never) -> set[str]:
        """Rebuild one server's ServerLists from its listing and its pins; returns what changed."""
        snapshot = self.trust.current
        pinned = self._pins_of(msg.identity, snapshot)
        lists, pin = {"tools": msg.tools, "prompts": msg.prompts}, msg.pin and bool(msg.identity)
        result = screen(lists, pinned, pin, sums, pause)
        if result.first_sight is not None and self.keeper is not None:
            self._first_sight[msg.identity] = Pinned(*(MappingProxyType(dict(result.first_sight[k]))
                                                       for k in KINDS))
            self._sighted[msg.identity] = time.monotonic()
            self._tell_keeper(PinFirstSight.of(msg.identity, msg.server, result.first_sight))
            report = False
        elif report and msg.untouched and pinned is not None and (
                added := self._added_at_first_start(msg.identity, result)):
            self._first_sight[msg.identity] = _extended(pinned, added)
            self._tell_keeper(PinFirstSight.of(msg.identity, msg.server, added, extend=True))
            result = screen(lists, self._first_sight[msg.identity], pin, sums, pause)
        if report and pin and (result.withheld_count or msg.identity in snapshot.withheld):
            self._tell_keeper(ReportWithheld.of(msg.identity, msg.server, result.withheld))
        new = ServerLists(msg.server, msg.prefix, result.shown["tools"], tuple(msg.resources),
                          tuple(msg.templates), result.shown["prompts"],
                          withheld=tuple((kind, name) for kind, items in result.withheld.items() for name in items),
                          instructions=msg.instructions, tasks=task_wire.server_form(msg.capabilities))
        old = self._lists.get(msg.server)
        self._lists[msg.server] = new
        changed = _diff(old, new)
        if not changed and old is not None and (old.instructions, old.tasks) != (new.instructions, new.tasks):
            # Only search (instructions) and task routing read them: a new snapshot, no list changed.
            self._publish()
        return changed

    def _pins_of(self, identity: str, snapshot: TrustSnapshot) -> Pinned | None:
        """The snapshot's pins, with what was told to the keeper and is not in a snapshot yet."""
        pinned, told = snapshot.pins.get(identity), self._first_sight.get(identity)
        if told is None:
            return pinned
        if pinned is None:
            return told
        missing = {k: {n: v for n, v in told.of(k).items() if n not in pinned.of(k)} for k in KINDS}
        if not any(missing.values()):
            self._first_sight.pop(identity, None)  # the keeper has written all of it
            return pinned
        return _extended(pinned, missing)

    def _added_at_first_start(self, identity: str, result) -> dict:
        """The new (never pinned) items of a listing that came within FIRST_SIGHT_WINDOW of the
        server's first sight in this run: kind → name → (digest, definition)."""
        since = self._sighted.get(identity)
        if since is None or time.monotonic() - since > FIRST_SIGHT_WINDOW or self.keeper is None:
            self._sighted.pop(identity, None)
            return {}
        added = {k: {n: (c["digest"], c["definition"]) for n, c in result.withheld.get(k, {}).items()
                     if c["kind"] == "new"} for k in KINDS}
        return added if any(added.values()) else {}

    def _tell_keeper(self, message) -> None:
        """Pins and withheld sets are recorded by the keeper; without one (a registry on its
        own) the screening still holds, nothing is written."""
        if self.keeper is not None and not tell(self.keeper, message):
            logger.warning("registry: the trust keeper has stopped; {} not recorded", type(message).__name__)

    def _mark(self, lists: set[str]) -> None:
        if not lists:
            return
        self._changed |= lists
        # Rebuild at once so callers see new tools immediately; only the notice is debounced.
        self._publish()
        self._debounce_notice()

    def _debounce_notice(self) -> None:
        if self._flush_timer is None:
            self._flush_timer = gevent.spawn_later(LIST_CHANGED_DEBOUNCE, self._tell_flush)

    def _publish(self) -> None:
        """Build the next snapshot whole, everything readers derive from it included (the views
        of every configured profile, each list's digest), then publish it in one store: no
        reader ever builds or stores into a snapshot (the search index and validators are the
        snapshot's own lazy attributes, see Catalogue)."""
        # Readers keep the previous snapshot while the next is built: none sees it half-built.
        # The lists are this actor's own, and its mailbox waits while it yields: nothing changes them.
        started = time.monotonic()
        pause = self._pause()
        kept: dict = {}
        cat = catalogue.build(self._lists, self.separator, self.writer.current.version + 1, self.reserved,
                              between=pause, approve=self._approve, reuse=self._entries, kept=kept)
        self._entries = kept
        self.writer.publish(views.with_views(cat, self.profiles, between=pause))
        self._publish_done(time.monotonic() - started)  # whatever was taken since is in this one

    def _pause(self):
        """A Slices for work over every server's tools when they are many, else nothing."""
        return Slices() if sum(len(sl.tools) for sl in self._lists.values()) > YIELD_ABOVE_TOOLS else never

    def _tell_flush(self) -> None:
        tell(self.actor_ref, _Flush())  # False: it stopped meanwhile, and nobody waits for the notice

    def _rebuild(self) -> None:
        changed, self._changed = frozenset(self._changed), set()
        if changed:
            self.bus.publish(ToolsChanged(lists=changed, version=self.writer.current.version))

    def on_failure(self, *exc_info) -> None:
        """Crashed (a bug): what the burst took is published if it can be, so its Connections are
        not left waiting for an answer that cannot come; then as on a stop."""
        try:
            if self._due:
                self._publish()
        except Exception as exc:  # noqa: BLE001 - what crashed may crash again: the waiters are lost then
            logger.error("registry: {} listings could not be published after a crash: {}", len(self._due), exc)
            self._due = []
        self.on_stop()

    def on_stop(self) -> None:
        if self._due:  # listings taken and not yet published: their waiters get their answer
            self._publish()
        if self._flush_timer is not None:
            self._flush_timer.kill(block=False)
        for server in list(self._holds):
            self._unhold(server)


def _diff(old: ServerLists | None, new: ServerLists) -> set[str]:
    old = old or ServerLists(new.server, new.prefix)
    changed = set()
    if old.tools != new.tools or old.prefix != new.prefix or old.withheld != new.withheld:
        changed.add("tools")
    if old.resources != new.resources or old.templates != new.templates:
        changed.add("resources")
    if old.prompts != new.prompts or old.prefix != new.prefix:
        changed.add("prompts")
    return changed


def _extended(pinned: Pinned, added) -> Pinned:
    """pinned with the items of added (kind → name → (digest, definition)) it does not have."""
    return Pinned(*(MappingProxyType({**added.get(k, {}), **pinned.of(k)}) for k in KINDS))
