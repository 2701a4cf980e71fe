"""RFC 7591 dynamic client registration: troupe registers itself once per authorization server."""
from __future__ import annotations

import re

import requests

from actors.auth.metadata import Discovered, DiscoveryError

REGISTER_TIMEOUT = 10.0
CLIENT_NAME = "troupe"
# RFC 6749 §A.1: a client_id is visible ASCII; it goes into the authorization URL shown to clients
_CLIENT_ID = re.compile(r"[\x20-\x7e]{1,512}")


KNOWN_METHODS = ("client_secret_post", "none", "client_secret_basic")


def auth_method(discovered: Discovered) -> str:
    """How troupe authenticates at the token endpoint: a secret in the body where the server takes
    it, else as a public client (PKCE alone), else HTTP Basic (RFC 8414's default)."""
    offered = discovered.auth_methods or ("client_secret_basic",)
    for method in KNOWN_METHODS:
        if method in offered:
            return method
    return offered[0]


def register(http: requests.Session, discovered: Discovered, redirect_uri: str) -> dict:
    """Register troupe as a client; returns {client_id, client_secret?, auth_method}. The POST goes
    only to the registration endpoint the checked metadata named, and follows no redirect."""
    if not discovered.registration_endpoint:
        raise DiscoveryError("the authorization server offers no client registration: configure auth.client_id")
    method = auth_method(discovered)
    body = {"client_name": CLIENT_NAME, "redirect_uris": [redirect_uri], "response_types": ["code"],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": method}
    if discovered.scopes:
        body["scope"] = " ".join(discovered.scopes)
    try:
        resp = http.post(discovered.registration_endpoint, json=body, timeout=REGISTER_TIMEOUT,
                         allow_redirects=False)
    except requests.RequestException as exc:
        raise DiscoveryError(f"client registration failed: {type(exc).__name__}") from None
    with resp:
        if resp.status_code not in (200, 201):
            raise DiscoveryError(f"client registration refused: HTTP {resp.status_code}")
        try:
            data = resp.json()
        except ValueError:
            data = None
    if not isinstance(data, dict) or not isinstance(data.get("client_id"), str):
        raise DiscoveryError("client registration answered without a client_id")
    if not _CLIENT_ID.fullmatch(data["client_id"]):
        raise DiscoveryError("client registration answered with a client_id that is not visible ASCII "
                             "of at most 512 characters")
    answered = data.get("token_endpoint_auth_method")
    secret = data.get("client_secret")
    return {"client_id": data["client_id"], "client_secret": secret if isinstance(secret, str) else None,
            "auth_method": answered if answered in KNOWN_METHODS else method}
