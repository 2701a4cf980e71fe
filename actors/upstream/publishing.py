"""What a Connection does with its lists once read: the first complete listing makes the server
ready; each later one that changed goes to the Registry (PublishServer) and its counts to the
Supervisor; one that did not change goes nowhere (no catalogue rebuild, no list_changed to
clients). A modern upstream's ttl re-reads and listen stream follow every read either way.

A mixin of the Connection actor: these methods run in its greenlet and touch only its state.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from actors.messages import ConnectionCounts, ConnectionReady, PublishServer
from actors.protocol.modern_client import MODERN
from actors.slicing import Slices
from actors.tells import tell
from actors.trust.provenance import identity_key as trust_identity
from actors.upstream.tool_limits import limited


@dataclass(frozen=True, slots=True)
class ListsPublished:
    """Told to a Connection (from the Registry's greenlet, through PublishServer.on_published):
    the catalogue now holds its first listing, so the server may be reported ready."""

    generation: int


class ListPublishing:
    """The lists half of the Connection actor (mixed into it): `_lists_read` is its UpstreamLists'
    `on_read`; `_list_changed` is what a server's list_changed asks for, `_relist_due` a modern ttl."""

    # What the Connection provides (declared for the type checker; set by Connection.__init__).
    config: Any
    generation: int
    log: Any
    era: Any
    lists: Any
    modern: Any
    registry: Any
    stats: Any
    supervisor: Any
    capabilities: dict
    server_info: dict
    instructions: str
    log_level: str | None
    _ready: bool
    _announcing: bool  # the first listing went to the Registry; ready once it is published
    _ready_counts: tuple[int, int, int]
    actor_ref: Any
    _failed: bool
    _used: bool
    describe: Callable[[], dict]
    _modern_lists: Callable[..., dict]
    _set_log_level: Callable[[str], None]

    def _lists_read(self, lists: dict[str, tuple], done: tuple, changed: bool) -> None:
        """A read ended (the first time: every kind's): to the registry if it changed; the first
        time, the server is ready."""
        if self._failed:
            return
        if self.era == MODERN:
            lists = self._modern_lists(lists, done, changed)
        if not changed and (self._ready or self._announcing):
            return  # the same lists as last handed on: nothing downstream to rebuild or tell
        lists = {**lists, "tools": self._within_limits(lists.get("tools", ()))}
        counts = (len(lists.get("tools", ())), len(lists.get("resources", ())), len(lists.get("prompts", ())))
        first = not self._ready and not self._announcing
        told = False
        if self.registry is not None:  # None: a client's own upstream (share: per_client) lists nothing
            # False: the registry stopped, so troupe is stopping; the lists have nobody to serve.
            told = tell(self.registry, PublishServer(self.config.name, self.config.effective_prefix,
                                                     lists.get("tools", ()), lists.get("resources", ()),
                                                     lists.get("templates", ()), lists.get("prompts", ()),
                                                     self.capabilities, trust_identity(self.config),
                                                     self.config.pin, self.instructions,
                                                     untouched=not self._used, keep=self.config.on_demand,
                                                     on_published=self._tell_published if first else None))
        if self._ready:
            tell(self.supervisor, ConnectionCounts(self.config.name, self.generation, *counts))
            return
        self._ready_counts = counts  # the latest, if another read ends before the first is served
        if first and told:
            self._announcing = True  # ready once the Registry has published them: ListsPublished
        elif not self._announcing:
            self.announce_ready()

    def _tell_published(self) -> None:
        """PublishServer.on_published, in the Registry's greenlet: tell this Connection."""
        tell(self.actor_ref, ListsPublished(self.generation))

    def announce_ready(self) -> None:
        """The first listing is in the catalogue (or has no Registry to go to): the server is ready."""
        if self._ready or self._failed:
            return
        self._ready, self._announcing = True, False
        self.log.info("ready: {} tools, {} resources, {} prompts", *self._ready_counts)
        if self.log_level:
            self._set_log_level(self.log_level)
        tools, resources, prompts = self._ready_counts
        tell(self.supervisor, ConnectionReady(self.config.name, self.generation, tools, resources, prompts,
                                              self.server_info, self.describe()))

    def _list_changed(self, kinds: tuple) -> None:
        """Re-read these kinds; one already being read is read once more when it answers."""
        if not self._failed:
            self.lists.changed(kinds)

    def _relist_due(self, kinds: tuple) -> None:
        """A modern list's ttl is up: re-read it, as above, without announcing a change."""
        if not self._failed:
            self.lists.due(self.modern.relist_due(kinds))

    def _within_limits(self, tools: tuple) -> tuple:
        """The tools cut to max_tools and max_tool_bytes; what is refused is logged once (until it
        changes) and shown in /status as this server's notes."""
        kept, notes = limited(tuple(tools), self.config.max_tools, self.config.max_tool_bytes, Slices(),
                              listed=self.lists.listed.get("tools"))
        if notes != self.stats.notes:
            for note in notes:
                self.log.warning("{}", note)
            self.stats.notes = notes
        return kept
