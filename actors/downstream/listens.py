"""A client's open `subscriptions/listen` streams (2026-07-28): what each one asked for, the
resources it follows upstream, and the notifications it gets, each stamped with its id.

Used only from its Session's greenlet; the Session stays the only writer."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

from actors.downstream.client_subscriptions import ClientSubscriptions
from actors.downstream.lifecycle import LIST_CHANGED_NOTICE as LIST_NOTICE
from actors.downstream.list_notices import ShownLists, kinds_of
from actors.protocol import jsonrpc, mcp, modern
from actors.tasks import wire as task_notice

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Catalogue


class Listen:
    """One open stream: the listen request's id (its subscriptionId), the sink its notifications
    and final answer go through, the list kinds it wants, the lists its client is taken to have
    (those of its opening, then of each notice: a stateless client's listings are not seen
    here), and the upstream resources it follows (a ClientSubscriptions of its own, so ending
    the stream unsubscribes exactly those)."""

    __slots__ = ("rid", "sink", "kinds", "lists", "resources", "task_ids")

    def __init__(self, rid, sink, kinds: frozenset, resources: ClientSubscriptions,
                 task_ids: frozenset = frozenset()) -> None:
        self.rid, self.sink, self.kinds, self.resources = rid, sink, kinds, resources
        self.lists = ShownLists()
        self.task_ids = task_ids  # the tasks it follows (SEP-2663 notifications/tasks)

    def notify(self, method: str, params: dict | None = None) -> None:
        out = dict(params or {})
        out["_meta"] = {**(out.get("_meta") or {}), modern.META_SUBSCRIPTION: self.rid}
        self.sink(jsonrpc.notification(method, out))


class ListenSubscribed:
    """Told by a Connection's reply callback to the Session: the upstream answered the
    resources/subscribe a listen stream sent for `original` (exposed to the client as `exposed`)."""

    __slots__ = ("rid", "server", "original", "exposed", "ok")

    def __init__(self, rid, server: str, original: str, exposed: str, ok: bool) -> None:
        self.rid, self.server, self.original, self.exposed, self.ok = rid, server, original, exposed, ok


class Listens:
    """Listen request id → Listen. `unsubscriber(rid)` gives the `(server, uri)` callback a
    stream's resources call when it ends: each stream follows upstream under an origin of its
    own (the connection counts followers by origin), so ending one stream never ends another's
    or the session's legacy subscriptions."""

    def __init__(self, unsubscriber: Callable[[Any], Callable[[str, str], None]]) -> None:
        self._unsubscriber = unsubscriber
        self._open: dict[Any, Listen] = {}

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, rid) -> bool:
        return isinstance(rid, (str, int)) and rid in self._open

    def open(self, rid, sink, wanted: dict, honored_uris: Iterable[str], cat: Catalogue,
             task_ids: Iterable[str] = ()) -> Listen:
        """Record a stream and acknowledge it: the acknowledgement is its first message. Its
        client is taken to have the lists of `cat` (its view now): a change comes as news only
        if it makes them differ. `task_ids`: the tasks it may follow, of those it asked for."""
        kinds = frozenset(kind for key, kind in modern.LISTEN_KINDS.items() if wanted.get(key))
        tasks = list(task_ids)
        listen = self._open[rid] = Listen(rid, sink, kinds, ClientSubscriptions(self._unsubscriber(rid)),
                                          frozenset(tasks))
        for kind in kinds:
            listen.lists.holds(kind, cat)
        honored: dict = {key: True for key, kind in modern.LISTEN_KINDS.items() if kind in kinds}
        uris = list(honored_uris)
        if uris:
            honored["resourceSubscriptions"] = uris
        if "taskIds" in wanted:
            honored["taskIds"] = tasks
        listen.notify(modern.ACKNOWLEDGED, {"notifications": honored})
        return listen

    def get(self, rid) -> Listen | None:
        return self._open.get(rid) if isinstance(rid, (str, int)) else None

    def list_changed(self, kinds: Iterable[str], cat: Catalogue) -> None:
        """Lists of these kinds changed (`cat`: the client's view now): each stream that asked
        for one hears of it if its list is news to that stream, which then takes its client to
        have fetched it (nothing else would tell)."""
        changed = kinds_of(kinds)
        for listen in list(self._open.values()):
            for kind in changed:
                if kind in listen.kinds and listen.lists.news(kind, cat):
                    listen.lists.holds(kind, cat)
                    listen.notify(LIST_NOTICE[kind])

    def updated(self, server: str, uri: str) -> None:
        """An upstream resource changed: each stream following it hears, under the URI it asked with."""
        for listen in list(self._open.values()):
            exposed = listen.resources.exposed_uri(server, uri)
            if exposed is not None:
                listen.notify("notifications/resources/updated", {"uri": exposed})

    def task_changed(self, task_id: str, task: dict) -> bool:
        """A followed task's state changed: each stream following it hears the whole task
        (SEP-2663 notifications/tasks, as tasks/get would answer now). False if none follows it."""
        heard = False
        for listen in list(self._open.values()):
            if task_id in listen.task_ids:
                listen.notify(task_notice.NOTIFICATION, task)
                heard = True
        return heard

    def subscribed(self, note: ListenSubscribed) -> None:
        """An upstream accepted (or refused) a stream's subscription; one accepted for a stream
        that has ended meanwhile is unsubscribed at once."""
        listen = self.get(note.rid)
        if listen is not None and note.ok:
            listen.resources.confirmed(note.server, note.original, note.exposed)
        elif note.ok:
            self._unsubscriber(note.rid)(note.server, note.original)

    def end(self, rid) -> bool:
        """Close one stream gracefully: its resources unsubscribed, its request answered; False if
        no stream has that id."""
        listen = self._open.pop(rid, None) if isinstance(rid, (str, int)) else None
        if listen is None:
            return False
        listen.resources.close()
        listen.sink(jsonrpc.result(rid, {"resultType": "complete", "_meta": {
            modern.META_SUBSCRIPTION: rid, modern.META_SERVER_INFO: mcp.SERVER_INFO}}))
        return True

    def close(self) -> None:
        """The client went away (or the session stops): every stream ends, answered once."""
        for rid in list(self._open):
            self.end(rid)
