"""Task ids troupe hands its clients: sealed like `requestState` (actors/protocol/request_state.py).

A client's task id names the server that runs the task, the id that server (or troupe, for a task
it minted) gave it, and its owner, all under troupe's HMAC: a client can neither forge one nor
turn another's into its own, and any troupe holding the same key (a cluster's instances) reads
it. The owner is the named client (serve.clients) that created the task, or the legacy session
of an anonymous client; an anonymous modern caller has no identity troupe could check, so for
it the sealed id itself is the capability. A task id a client may not use is answered as
unknown (-32602), never saying whose it is.
"""
from __future__ import annotations

from dataclasses import dataclass

from actors.protocol.request_state import StateSealer

KIND = "task"  # a sealed requestState never opens as a task id, nor the reverse


@dataclass(frozen=True, slots=True)
class TaskRef:
    """What an opened task id names: the server, the upstream's task id (troupe's own record id
    for a minted one), its owner ("" = whoever holds the id) and whether troupe minted it."""

    task_id: str  # the sealed id itself, as the client holds it
    server: str
    upstream_id: str
    owner: str
    minted: bool
    form: str  # the server's tasks: wire.MODERN or wire.LEGACY ("" for a minted one)


class TaskIds:
    """Issues and opens task ids under one StateSealer. Sealed ids expire `lifetime_s` after
    they were issued: past that troupe keeps no record of the task, whatever its TTL said."""

    __slots__ = ("_sealer", "_lifetime")

    def __init__(self, sealer: StateSealer, lifetime_s: float) -> None:
        self._sealer, self._lifetime = sealer, lifetime_s

    @property
    def lifetime(self) -> float:
        """Seconds a sealed id opens for after it was issued."""
        return self._lifetime

    def issue(self, server: str, upstream_id: str, owner: str, minted: bool, form: str = "") -> str:
        return self._sealer.seal({"k": KIND, "s": server, "u": upstream_id, "o": owner, "m": int(minted),
                                  "f": form}, self._lifetime)

    def open(self, task_id, caller: str) -> TaskRef | None:
        """The task `task_id` names if `caller` (its owner key, "" for an anonymous modern caller)
        may use it; None for anything else (forged, damaged, expired, another's)."""
        payload = self._sealer.open(task_id)
        if not isinstance(payload, dict) or payload.get("k") != KIND:
            return None
        server, upstream, owner = payload.get("s"), payload.get("u"), payload.get("o")
        if not (isinstance(server, str) and isinstance(upstream, str) and isinstance(owner, str)):
            return None
        if owner and owner != caller:
            return None
        form = payload.get("f")
        return TaskRef(task_id, server, upstream, owner, bool(payload.get("m")), form if isinstance(form, str) else "")
