"""Registry actor: the only writer of the catalogue; publishes immutable snapshots."""
from __future__ import annotations

import gevent
import pykka
from loguru import logger

from . import catalogue
from .bus import BusClient
from .catalogue import Catalogue, ServerLists
from .events import ToolsChanged
from .messages import DropServer, PublishServer

LIST_CHANGED_DEBOUNCE = 0.05  # coalesce bursts (N servers arriving at once) into one notice


class CatalogueBox:
    """Holds the current snapshot; readers take `.current` with no actor hop."""

    def __init__(self) -> None:
        self.current = Catalogue()


class _Flush:
    pass


class Registry(pykka.ThreadingActor):
    def __init__(self, box: CatalogueBox, bus: BusClient, separator: str = "__") -> None:
        super().__init__()
        self.box, self.bus, self.separator = box, bus, separator
        self._lists: dict[str, ServerLists] = {}
        self._changed: set[str] = set()
        self._flush_timer: gevent.Greenlet | None = None

    def on_receive(self, message):
        match message:
            case PublishServer():
                new = ServerLists(message.server, message.prefix, tuple(message.tools),
                                  tuple(message.resources), tuple(message.templates), tuple(message.prompts))
                old = self._lists.get(message.server)
                self._lists[message.server] = new
                self._mark(_diff(old, new))
            case DropServer(server=server):
                old = self._lists.pop(server, None)
                if old is not None:
                    self._mark(_diff(old, ServerLists(server, old.prefix)))
            case _Flush():
                self._flush_timer = None
                self._rebuild()
            case _:
                logger.warning("registry: unknown message {!r}", message)

    def _mark(self, lists: set[str]) -> None:
        if not lists:
            return
        self._changed |= lists
        # Rebuild at once so callers see new tools immediately; only the notice is debounced.
        self.box.current = catalogue.build(self._lists, self.separator, self.box.current.version + 1)
        if self._flush_timer is None:
            self._flush_timer = gevent.spawn_later(LIST_CHANGED_DEBOUNCE, self._tell_flush)

    def _tell_flush(self) -> None:
        try:
            self.actor_ref.tell(_Flush())
        except pykka.ActorDeadError:
            pass

    def _rebuild(self) -> None:
        changed, self._changed = frozenset(self._changed), set()
        if changed:
            self.bus.publish(ToolsChanged(lists=changed, version=self.box.current.version))

    def on_stop(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.kill(block=False)


def _diff(old: ServerLists | None, new: ServerLists) -> set[str]:
    old = old or ServerLists(new.server, new.prefix)
    changed = set()
    if old.tools != new.tools or old.prefix != new.prefix:
        changed.add("tools")
    if old.resources != new.resources or old.templates != new.templates:
        changed.add("resources")
    if old.prompts != new.prompts or old.prefix != new.prefix:
        changed.add("prompts")
    return changed
