"""The Supervisor's side of upstream OAuth: a server refused with 401 waits in needs-auth (no
backoff, no circuit) until the AuthKeeper tells SignedIn. A mixin of the Supervisor actor."""
from __future__ import annotations

from typing import Any, Callable

from actors.auth.messages import SignedIn, SignInRequired
from actors.events.kinds import ServerDisconnected
from actors.supervision.child import Child
from actors.supervision.states import CALLABLE_STATES, ServerState
from actors.transports.base import NEEDS_AUTH

__all__ = ["SignInGate", "SignInRequired", "SignedIn"]


class SignInGate:
    """Mixed into the Supervisor: these methods run in its actor and touch only its Child records.
    The AuthKeeper owns the sign-in itself (its URL is in the published AuthSnapshot, shown by the
    status report)."""

    children: dict[str, Child]
    bus: Any
    _spawn: Callable[[Child], None]
    _set_state: Callable[[Child, ServerState, str], None]
    _check_settled: Callable[[], None]

    def _needs_auth(self, child: Child, reason: str) -> bool:
        """A ConnectionFailed for a 401: hold the server in needs-auth; True if that is what it was."""
        if not reason.startswith(NEEDS_AUTH):
            return False
        was_up = child.state in CALLABLE_STATES
        if child.ref is not None:
            child.ref.stop(block=False)
            child.ref = None
        if was_up:
            self.bus.publish(ServerDisconnected(child.config.name, reason))
        child.settled = True
        if child.signed_in:  # the keeper already has a newer token (a refresh raced the failure)
            child.signed_in = False
            self._spawn(child)
        else:
            self._set_state(child, ServerState.NEEDS_AUTH,
                            f"{reason}; sign in with `troupe auth {child.config.name}` (auth_url in /status)")
        self._check_settled()
        return True

    def _signed_in(self, url: str) -> None:
        """The AuthKeeper has a token for `url`: start its servers waiting in needs-auth."""
        for child in self._at(url):
            if child.state == ServerState.NEEDS_AUTH and child.ref is None:
                if child.config.enabled:
                    child.failures.clear()
                    self._spawn(child)
            elif child.ref is not None:
                child.signed_in = True  # its needs-auth failure may still be on its way

    def _sign_in_required(self, url: str) -> None:
        """The grant for `url` is gone: its running servers wait for a sign-in (their link ends)."""
        for child in self._at(url):
            if child.ref is not None:
                child.signed_in = False
                self._needs_auth(child, f"{NEEDS_AUTH}: the authorization server refused the refresh token")

    def _at(self, url: str) -> list[Child]:
        return [c for c in self.children.values() if c.config.http is not None and c.config.http.url == url]
