"""The idle watch of an on-demand Connection, and the answer of calls that never left troupe.

When nothing has gone on for the server's `idle_stop` (no request in flight or queued, no
resource subscription), the Connection proposes its own stop to the Supervisor, and stops taking
calls only once the Supervisor agrees and nothing came in since. A call that reaches it after
that, or is still in its mailbox when it stops, is answered as never sent (link "unsent").

A mixin of the Connection actor: these methods run in its greenlet and touch only its state.
A running task counts as activity through the requests for it (the TaskKeeper's polls, a
client's tasks/get, a tasks/result in flight): after a task's request the server stays up at
least TASK_QUIET, longer than the keeper's slowest poll, whatever its idle_stop.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import gevent

from actors.messages import Forward
from actors.protocol.modern_client import LISTEN
from actors.supervision.demand import ConnectionIdle, ConnectionIdled, StopIdle
from actors.tells import tell
from actors.upstream.requests import never_sent


STANDING = (LISTEN,)  # requests that stay open for as long as the connection: not a use of the server
TASK_QUIET = 30.0  # seconds after a task's last request (tasks/*, or a call asking for a task) before a stop


@dataclass(frozen=True, slots=True)
class IdleCheck:
    """The Connection's own idle timer: look whether it has been idle for its idle_stop."""

    generation: int


class IdleWatch:
    """The idle half of the Connection actor (mixed into it). `_active()` is called for each call
    that reaches it and `_quiet()` when a request ends; `idled` is True once it agreed to stop."""

    config: Any
    generation: int
    supervisor: Any
    requests: Any
    waiting: Any
    subscriptions: Any
    log: Any
    _ready: bool
    _tell: Callable[[Any], None]
    actor_ref: Any

    def _init_idle(self, watched: bool) -> None:
        # Only a shared on-demand upstream stops when idle; a client's own stops when its client leaves.
        self._idle_watched = watched and self.config.on_demand
        self._activity = 0  # calls that reached it: a StopIdle naming an older count is refused
        self._last_active = time.monotonic()
        self._task_at: float | None = None  # when a task's last request came: no stop within TASK_QUIET
        self.idled = False
        self._idle_timer: gevent.Greenlet | None = None

    def _active(self, fwd) -> None:
        self._activity += 1
        self._last_active = time.monotonic()
        if fwd.method.startswith("tasks/") or (type(fwd.params) is dict and "task" in fwd.params):
            self._task_at = self._last_active

    def _quiet(self) -> None:
        self._last_active = time.monotonic()

    def _busy(self) -> bool:
        # troupe's own standing listen stream (a modern upstream's subscriptions/listen) is no use
        return bool(self.requests.busy(STANDING) or len(self.waiting) or self.subscriptions.uris())

    def _arm_idle(self, delay: float | None = None) -> None:
        """Look again in `delay` seconds (its idle_stop when None)."""
        if not self._idle_watched or self.idled:
            return
        if self._idle_timer is not None:
            self._idle_timer.kill(block=False)
        self._idle_timer = gevent.spawn_later(self.config.idle_stop if delay is None else max(0.01, delay),
                                              self._tell, IdleCheck(self.generation))

    def _idle_check(self) -> None:
        self._idle_timer = None
        if not self._ready or self.idled:
            return
        now = time.monotonic()
        quiet = now - self._last_active
        # how long until both its idle_stop has passed and a task's last request is TASK_QUIET old
        wait = max(self.config.idle_stop - quiet, (self._task_at + TASK_QUIET - now) if self._task_at else 0.0)
        if self._busy():
            self._arm_idle()
        elif wait > 0:
            self._arm_idle(wait)
        else:
            tell(self.supervisor, ConnectionIdle(self.config.name, self.generation, self._activity, quiet))
            self._arm_idle()  # kept (a client's own upstream of it is attached): propose again later

    def _stop_idle(self, msg: StopIdle) -> None:
        """The Supervisor agrees: stop taking calls if nothing came in since it proposed."""
        if msg.generation != self.generation or self.idled or not self._ready:
            return
        if msg.activity != self._activity or self._busy():
            self.log.debug("idle stop refused: a call came in meanwhile")
            return
        self.idled = True
        if self._idle_timer is not None:
            self._idle_timer.kill(block=False)
        quiet = time.monotonic() - self._last_active
        tell(self.supervisor, ConnectionIdled(self.config.name, self.generation, quiet, msg.learned))

    def _unsent_idle(self, fwd) -> None:
        """A call that reached this Connection after it agreed to stop: answered as never sent, so its
        Session wakes the server again and sends it to the next Connection."""
        fwd.on_reply(never_sent(self.config.name, f"{self.config.name}: stopping for idleness"))

    def _answer_unread(self, unread: list) -> None:
        """Forwards still in the mailbox of this stopping Connection (`unread`, as unread_tells
        took them; told after its stop, or queued behind it) never left troupe: each is answered
        as unsent, so a FailoverFront sends it to the next target and a Session treats it as a
        link lost before any of it ran, rather than waiting out its deadline for an answer pykka
        would have dropped."""
        unsent = never_sent(self.config.name, f"{self.config.name}: connection stopped")
        for message in unread:
            if isinstance(message, Forward):
                try:
                    message.on_reply(unsent)
                except Exception:
                    self.log.exception("reply handler failed")
