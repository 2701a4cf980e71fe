"""RFC 7591 dynamic client registration: troupe registers itself once per authorization server."""
from __future__ import annotations

import requests

from actors.auth.metadata import Discovered, DiscoveryError

REGISTER_TIMEOUT = 10.0
CLIENT_NAME = "troupe"


def auth_method(discovered: Discovered) -> str:
    """How troupe authenticates at the token endpoint: a secret in the body where the server takes
    it, else as a public client (PKCE alone), else HTTP Basic (RFC 8414's default)."""
    offered = discovered.auth_methods or ("client_secret_basic",)
    for method in ("client_secret_post", "none", "client_secret_basic"):
        if method in offered:
            return method
    return offered[0]


def register(http: requests.Session, discovered: Discovered, redirect_uri: str) -> dict:
    """Register troupe as a client; returns {client_id, client_secret?, auth_method}."""
    if not discovered.registration_endpoint:
        raise DiscoveryError(f"{discovered.issuer} offers no client registration: configure auth.client_id")
    method = auth_method(discovered)
    body = {"client_name": CLIENT_NAME, "redirect_uris": [redirect_uri], "response_types": ["code"],
            "grant_types": ["authorization_code", "refresh_token"], "token_endpoint_auth_method": method}
    if discovered.scopes:
        body["scope"] = " ".join(discovered.scopes)
    try:
        resp = http.post(discovered.registration_endpoint, json=body, timeout=REGISTER_TIMEOUT)
    except requests.RequestException as exc:
        raise DiscoveryError(f"client registration failed: {type(exc).__name__}") from None
    with resp:
        if resp.status_code not in (200, 201):
            raise DiscoveryError(f"client registration refused: HTTP {resp.status_code}")
        data = resp.json()
    if not isinstance(data, dict) or not isinstance(data.get("client_id"), str):
        raise DiscoveryError("client registration answered without a client_id")
    return {"client_id": data["client_id"], "client_secret": data.get("client_secret"),
            "auth_method": data.get("token_endpoint_auth_method") or method}
