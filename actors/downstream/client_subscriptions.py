"""One client's resource subscriptions: which upstream resources it follows, under which URI
it asked, and the unsubscribes owed upstream when it stops following or goes away.

Used only from its Session's greenlet; the Session stays the only writer."""
from __future__ import annotations

from typing import Callable

# (server, upstream URI): the key a Connection's ResourceUpdated names a resource by
Followed = tuple[str, str]


class ClientSubscriptions:
    """(server, upstream URI) → the URI the client subscribed with.

    `unsubscribe_upstream(server, uri)` tells the owning connection this client stopped
    following; the connection counts followers and tells its server only for the last one.
    A subscription is recorded only once its server accepted it (`confirmed`), so a refused
    subscribe leaves nothing to unsubscribe.
    """

    def __init__(self, unsubscribe_upstream: Callable[[str, str], None]) -> None:
        self._unsubscribe_upstream = unsubscribe_upstream
        self._followed: dict[Followed, str] = {}

    def __len__(self) -> int:
        return len(self._followed)

    def follows(self, server: str, uri: str) -> bool:
        """True if the client already follows this upstream resource: subscribe again is a no-op."""
        return (server, uri) in self._followed

    def confirmed(self, server: str, uri: str, exposed: str) -> None:
        """The server accepted the subscribe the client sent for `exposed`."""
        self._followed[(server, uri)] = exposed

    def exposed_uri(self, server: str, uri: str) -> str | None:
        """The URI to name in notifications/resources/updated, or None if the client does not follow it."""
        return self._followed.get((server, uri))

    def drop(self, server: str, uri: str) -> bool:
        """The client unsubscribed: forget it and tell upstream; False if it did not follow it."""
        if self._followed.pop((server, uri), None) is None:
            return False
        self._unsubscribe_upstream(server, uri)
        return True

    def close(self) -> None:
        """The client went away: every resource it followed is unsubscribed upstream, once."""
        followed, self._followed = list(self._followed), {}
        for server, uri in followed:
            self._unsubscribe_upstream(server, uri)
