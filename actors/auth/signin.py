"""What a sign-in is while it runs, as the AuthKeeper holds it: the pending sign-in and its error.

Apart from actors/auth/flow.py (which does the network steps with requests and authlib) so that
the keeper, started on every run, imports neither until a server asks for OAuth (issue: lean start)."""
from __future__ import annotations

from dataclasses import dataclass, field

from actors.auth import url_rules
from actors.auth.tokens import Grant


class SignInError(Exception):
    """A step of a sign-in failed; `rejected` when the authorization server refused the grant
    (sign in again) rather than being unreachable (try later)."""

    def __init__(self, message: str, rejected: bool = False) -> None:
        super().__init__(message)
        self.rejected = rejected


@dataclass(frozen=True, slots=True)
class Pending:
    """One sign-in waiting for the browser: the state it is known by, its PKCE verifier, the URL to
    open, and the grant (client, endpoints, no token yet) the code is exchanged into."""

    key: str
    auth_url: str
    grant: Grant
    state: str = field(repr=False)
    verifier: str = field(repr=False)
    issuer: str = ""  # the authorization server's, as its checked metadata names it
    iss_required: bool = False  # it promised an `iss` on its authorization response (RFC 9207)

    def iss_refusal(self, iss: str | None) -> str | None:
        """Why the callback's `iss` refuses its code (RFC 9207), or None."""
        return url_rules.iss_refusal(iss, self.issuer, self.iss_required) if self.issuer else None
