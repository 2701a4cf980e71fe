"""What the AuthKeeper receives and sends. No field holds a token, a code or a secret in its repr."""
from __future__ import annotations

from dataclasses import dataclass, field

import pykka

from actors.settings.upstream_auth import UpstreamAuth


@dataclass(frozen=True, slots=True)
class Unauthorized:
    """Told by an HTTP transport (from its request greenlet) to the AuthKeeper: the server answered
    401. The keeper refreshes once if the refused token is its current one, else starts a sign-in."""

    server: str  # the server's name (the Supervisor's key)
    url: str  # the server's URL: the key of its grant
    challenge: str | None  # the WWW-Authenticate header (its resource_metadata and scope)
    used: str | None  # fingerprint of the bearer the refused request carried (tokens.fingerprint)
    settings: UpstreamAuth | None = None  # the server's `auth:` entry, if any
    client: str | None = None  # `auth: per_client`: the client whose own request was refused


@dataclass(frozen=True, slots=True)
class CompleteSignIn:
    """Told by the HTTP front's /oauth/callback: exchange `code` for the flow known by `state`
    (unless its `iss` is not the issuer's, RFC 9207). Reply: the signed-in server's URL; KeyError
    for an unknown or used state, SignInError else."""

    state: str = field(repr=False)
    code: str = field(repr=False)
    reply: pykka.ThreadingFuture = field(repr=False)
    iss: str | None = None  # the response's RFC 9207 issuer, None when it carried none


@dataclass(frozen=True, slots=True)
class SetRedirect:
    """Told by the runtime once troupe's HTTP front listens: `url` is its /oauth/callback."""

    url: str


@dataclass(frozen=True, slots=True)
class SignedIn:
    """Told by the AuthKeeper to the Supervisor: the server at `url` has a token now (a sign-in, or
    a refresh after a 401); the Supervisor starts its servers that wait in needs-auth."""

    url: str


@dataclass(frozen=True, slots=True)
class SignInRequired:
    """Told by the AuthKeeper to the Supervisor: the grant for `url` is gone (its refresh token was
    refused); the Supervisor holds the servers running against it in needs-auth."""

    url: str
