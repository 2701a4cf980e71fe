"""The blocking steps of a sign-in, run in greenlets the AuthKeeper spawns (never in the actor):
discovery and registration up to an authorization URL, the code exchange, a refresh. The OAuth
requests themselves are authlib's (PKCE S256, client authentication, token parsing); none of
them follows a redirect, and each goes to an endpoint that passed actors/auth/url_rules.py."""
from __future__ import annotations

import secrets
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Iterator

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError

from actors.auth import metadata, registration, url_rules
from actors.auth.signin import Pending, SignInError
from actors.auth.tokens import Grant
from actors.settings.upstream_auth import UpstreamAuth

__all__ = ("Pending", "SignInError", "begin", "exchange", "refresh")  # the keeper's steps, and their types

TOKEN_TIMEOUT = 15.0  # a token or refresh request
# OAuth errors that mean the grant itself is dead (revoked, expired, client gone): sign in again.
REJECTED = ("invalid_grant", "invalid_client", "unauthorized_client", "invalid_token", "access_denied")


class _OAuth(OAuth2Session):
    """authlib's requests client, following no redirect (a token endpoint that redirects is not
    one the metadata named)."""

    def get_redirect_target(self, resp):
        return None


@contextmanager
def _oauth(grant: Grant) -> Iterator[Any]:
    """authlib's requests client for this grant's client (PKCE S256), closed after use."""
    session: Any = _OAuth(grant.client_id, grant.client_secret, token_endpoint_auth_method=grant.auth_method,
                                 scope=grant.scope, redirect_uri=grant.redirect_uri, code_challenge_method="S256",
                                 default_timeout=TOKEN_TIMEOUT)
    try:
        yield session
    finally:
        session.close()


def begin(key: str, url: str, challenge: str | None, settings: UpstreamAuth | None, redirect_uri: str,
          known: Grant | None) -> Pending:
    """Discover the server's authorization server, register (or reuse a client), build the URL."""
    with metadata.NoRedirects() as http:
        try:
            found = metadata.discover(http, url, metadata.challenge_params(challenge))
        except metadata.DiscoveryError as exc:
            raise SignInError(str(exc)) from None
        scopes = (settings.scopes if settings and settings.scopes else found.scopes)
        scope = " ".join(scopes) or None
        if settings is not None and settings.client_id:
            secret = settings.secret()
            client = {"client_id": settings.client_id, "client_secret": secret,
                      "auth_method": "client_secret_post" if secret else "none"}
        elif known is not None and known.redirect_uri == redirect_uri and known.token_endpoint == found.token_endpoint:
            client = {"client_id": known.client_id, "client_secret": known.client_secret,
                      "auth_method": known.auth_method}  # registered before: not again
        else:
            try:
                client = registration.register(http, replace(found, scopes=tuple(scopes)), redirect_uri)
            except metadata.DiscoveryError as exc:
                raise SignInError(str(exc)) from None
    grant = Grant(found.token_endpoint, found.resource, client["client_id"], client["auth_method"], redirect_uri,
                  scope=scope, client_secret=client.get("client_secret"))
    verifier, state = secrets.token_urlsafe(48), secrets.token_urlsafe(24)
    with _oauth(grant) as oauth:
        auth_url, _ = oauth.create_authorization_url(found.authorization_endpoint, state=state,
                                                     code_verifier=verifier, resource=found.resource)
    return Pending(key, auth_url, grant, state, verifier, found.issuer, found.iss_required)


def exchange(pending: Pending, code: str) -> Grant:
    """The authorization code (with the PKCE verifier and the resource) for tokens."""
    grant = pending.grant
    with _oauth(grant) as oauth:
        try:
            token = oauth.fetch_token(grant.token_endpoint, code=code, code_verifier=pending.verifier,
                                      resource=grant.resource)
        except OAuthError as exc:
            raise SignInError(f"the code was refused: {exc.error}", rejected=True) from None
        except (requests.RequestException, ValueError) as exc:
            raise SignInError(f"token request failed: {type(exc).__name__}") from None
    return grant.with_token(token)


def refresh(grant: Grant) -> Grant:
    """New tokens for a refresh token; SignInError(rejected=True) when it was revoked or expired."""
    if not grant.refresh_token:
        raise SignInError("no refresh token", rejected=True)
    try:  # a grant stored by an older troupe was not checked when it was made
        url_rules.check_authorization_url(grant.token_endpoint, grant.resource, "token endpoint")
    except url_rules.Refused as exc:
        raise SignInError(f"refresh refused: {exc}", rejected=True) from None
    with _oauth(grant) as oauth:
        try:
            token = oauth.refresh_token(grant.token_endpoint, refresh_token=grant.refresh_token,
                                        resource=grant.resource)
        except OAuthError as exc:
            raise SignInError(f"refresh refused: {exc.error}", rejected=exc.error in REJECTED) from None
        except (requests.RequestException, ValueError) as exc:
            raise SignInError(f"refresh failed: {type(exc).__name__}") from None
    return grant.with_token(token)
