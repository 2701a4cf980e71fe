"""Session quotas of the HTTP front: how many sessions each client may hold, and, when a new one
needs room, whose idle session goes. Pure policy over counts; the SessionTable owns the sessions.

A client is a name of serve.clients, or None for every request that names none (the operator's
token, or a troupe without clients): those share one bucket. A named client may hold its
profile's `max_sessions` (default 100). The unnamed bucket takes serve.profile's, when set;
otherwise 100 when clients are named (it is then only the operator), and the global ceiling
(serve.max_sessions) when none are (it is then everyone).

The rule, in the order `make_room` applies it:
1. A client at its quota makes room among its own sessions (its oldest idle one goes), or is
   refused with an error naming its quota. Another client's session is never touched for it.
2. At the global ceiling, the session that goes is the oldest idle one of a client over its fair
   share (the ceiling divided by the clients holding sessions, the asker counted) and holding
   more than the asker, the biggest such client first; otherwise the asker's own oldest idle
   one; otherwise the asker is refused. A client within its fair share never loses a session
   to another client.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from actors.settings.model import DEFAULT_CLIENT_SESSIONS, Config

CLIENT_FULL, FRONT_FULL = "client", "front"  # Room.refused: the client's own quota, or serve.max_sessions


@dataclass(frozen=True, slots=True)
class Room:
    """make_room's answer: nothing to do (both None), close `evict` (an idle session of
    `evict_from`, a client key) first, or refuse (`refused` is CLIENT_FULL or FRONT_FULL)."""

    evict: object = None
    evict_from: object = None
    refused: str | None = None


OPEN = Room()


def make_room(asker, held: Mapping, quota: int, ceiling: int, oldest_idle: Callable[[Any], Any]) -> Room:
    """Where a new session of client `asker` comes from. `held` maps each client key to the
    sessions it holds now (absent: none); `quota` is the asker's; `oldest_idle(key)` gives that
    client's least recently used idle session, or None. Cost: one pass over the clients."""
    mine = held.get(asker, 0)
    if quota < ceiling and mine >= quota:  # a quota as big as the ceiling is the ceiling's (rule 2)
        victim = oldest_idle(asker)
        return Room(victim, asker) if victim is not None else Room(refused=CLIENT_FULL)
    total = sum(held.values())
    if total < ceiling:
        return OPEN
    holders = sum(1 for n in held.values() if n > 0) + (0 if mine else 1)
    fair = ceiling // holders
    # Only a client over its fair share and holding more than the asker gives way, biggest first.
    for key in sorted((k for k, n in held.items() if n > fair and n > mine), key=lambda k: -held[k]):
        victim = oldest_idle(key)
        if victim is not None:
            return Room(victim, key)
    victim = oldest_idle(asker)
    return Room(victim, asker) if victim is not None else Room(refused=FRONT_FULL)


class Quotas:
    """Each client's quota, read from the live config (a reload that changes a profile's
    max_sessions applies to the next session opened)."""

    def __init__(self, config_of: Callable[[], Config]) -> None:
        self._config = config_of

    def of(self, client) -> tuple[int, str]:
        """The quota of a serve.clients entry (None: the unnamed bucket), and the config key it
        comes from (for a refusal's text)."""
        config = self._config()
        serve = config.serve
        name = client.profile if client is not None else serve.profile
        profile = config.profile(name)
        if profile is not None:
            return profile.max_sessions, f"profiles.{name}.max_sessions"
        if client is None and not serve.clients:
            return serve.max_sessions, "serve.max_sessions"
        return DEFAULT_CLIENT_SESSIONS, f"the default of {DEFAULT_CLIENT_SESSIONS} per client"


def refusal_text(client, held: int, quota: int, source: str) -> str:
    """The error a client at its quota with every session busy gets (no token in it, ever)."""
    who = f"client {client.name!r}" if client is not None else "the clients without a name (together)"
    return (f"session quota full: {who} holds {held} sessions, its quota ({source}) is {quota}, and "
            f"every one is busy; close one (DELETE) or retry later")
