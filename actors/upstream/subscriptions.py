"""Resource subscriptions of one upstream: which sessions follow which URI; upstream sees only 0↔1."""
from __future__ import annotations

from typing import Any, Callable

SUBSCRIBE, UNSUBSCRIBE = "resources/subscribe", "resources/unsubscribe"


class UpstreamSubscriptions:
    """Owned by one Connection (so by one actor): the subscribers of each upstream URI.

    The first subscriber's request goes upstream; later ones are answered at once. The last
    one leaving (unsubscribe, or its session stopping) sends resources/unsubscribe upstream.
    """

    def __init__(self, send: Callable[[str, dict, Callable], None]) -> None:
        self._send = send  # send(method, params, on_reply): an upstream request of the connection
        self._followers: dict[str, set] = {}  # upstream uri → sessions (their refs)

    def handles(self, method: str) -> bool:
        return method in (SUBSCRIBE, UNSUBSCRIBE)

    def request(self, method: str, params: Any, origin, on_reply: Callable) -> None:
        uri = params.get("uri") if isinstance(params, dict) else None
        if not isinstance(uri, str):
            self._send(method, params, on_reply)  # the server answers what troupe cannot judge
            return
        followers = self._followers.get(uri)
        if method == UNSUBSCRIBE:
            self._leave(uri, origin)
            on_reply({})
        elif followers:
            followers.add(origin)  # upstream already sends this URI's updates
            on_reply({})
        else:
            def subscribed(outcome) -> None:
                if isinstance(outcome, dict):
                    self._followers.setdefault(uri, set()).add(origin)
                on_reply(outcome)
            self._send(method, params, subscribed)

    def uris(self) -> tuple[str, ...]:
        """The URIs some session follows (what a modern upstream's listen stream asks for)."""
        return tuple(self._followers)

    def drop(self, origin) -> None:
        """A session went away: it follows nothing any more."""
        for uri in [u for u, f in self._followers.items() if origin in f]:
            self._leave(uri, origin)

    def _leave(self, uri: str, origin) -> None:
        followers = self._followers.get(uri)
        if followers is None or origin not in followers:
            return
        followers.discard(origin)
        if not followers:
            del self._followers[uri]
            self._send(UNSUBSCRIBE, {"uri": uri}, lambda outcome: None)
