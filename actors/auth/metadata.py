"""Where an upstream's authorization server is and what it offers: RFC 9728 protected-resource
metadata, RFC 8414 / OpenID Connect discovery, with the MCP spec's fallbacks (2025-03-26: the
server's own origin with /authorize, /token and /register)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

METADATA_TIMEOUT = 10.0  # each metadata GET; a sign-in waits for a person anyway, not for this
_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')


class DiscoveryError(Exception):
    """The server's authorization setup could not be found or read."""


@dataclass(frozen=True, slots=True)
class Discovered:
    """What a sign-in needs to know of a protected server and its authorization server."""

    resource: str  # the RFC 8707 resource indicator sent on authorize and token requests
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None = None
    scopes: tuple[str, ...] = ()  # what the challenge or the resource metadata suggests asking for
    auth_methods: tuple[str, ...] = ()  # token_endpoint_auth_methods_supported


def challenge_params(header: str | None) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer k="v", …` challenge (lower-case keys)."""
    if not header:
        return {}
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {m.group(1).lower(): (m.group(2) if m.group(2) is not None else m.group(3)) for m in _PARAM.finditer(rest)}


def canonical_resource(url: str) -> str:
    """RFC 8707 / MCP canonical URI: scheme and host lower-case, no fragment, no query."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def resource_metadata_urls(server_url: str, challenge: dict[str, str]) -> list[str]:
    """RFC 9728 lookups in the spec's order: the challenge's resource_metadata, then the well-known
    URI with the server's path inserted, then at the root."""
    urls = [challenge["resource_metadata"]] if challenge.get("resource_metadata") else []
    path = urlsplit(server_url).path.rstrip("/")
    base = _origin(server_url) + "/.well-known/oauth-protected-resource"
    if path:
        urls.append(base + path)
    urls.append(base)
    return urls


def authorization_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 and OpenID discovery URLs for an issuer, path-inserted forms first (MCP 2025-06-18)."""
    path = urlsplit(issuer).path.rstrip("/")
    origin = _origin(issuer)
    if not path:
        return [origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"]
    return [origin + "/.well-known/oauth-authorization-server" + path,
            origin + "/.well-known/openid-configuration" + path,
            origin + path + "/.well-known/openid-configuration"]


def _get_json(http: requests.Session, url: str) -> dict | None:
    try:
        resp = http.get(url, headers={"Accept": "application/json"}, timeout=METADATA_TIMEOUT)
    except requests.RequestException:
        return None
    with resp:
        if resp.status_code != 200:
            return None
        try:
            body = resp.json()
        except ValueError:
            return None
    return body if isinstance(body, dict) else None


def parse_authorization_metadata(data: dict[str, Any], issuer: str) -> dict[str, Any]:
    """Check RFC 8414 metadata: the endpoints a code flow needs are present and absolute."""
    for key in ("authorization_endpoint", "token_endpoint"):
        value = data.get(key)
        # http(s) only: the authorization URL is shown as a link (dashboard) and opened in a browser
        if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
            raise DiscoveryError(f"authorization server metadata of {issuer} has no http(s) {key}")
    methods = data.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        raise DiscoveryError(f"{issuer} does not support PKCE S256")  # the spec forbids going on without it
    return data


def discover(http: requests.Session, server_url: str, challenge: dict[str, str]) -> Discovered:
    """Read the protected-resource metadata, then the authorization server's; blocking (a greenlet)."""
    resource_meta = next((d for d in map(lambda u: _get_json(http, u), resource_metadata_urls(server_url, challenge))
                          if d is not None), None)
    resource = canonical_resource(server_url)
    scopes: tuple[str, ...] = ()
    if resource_meta is not None:
        servers = resource_meta.get("authorization_servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
            raise DiscoveryError("protected-resource metadata names no authorization server")
        issuer = servers[0]
        if isinstance(resource_meta.get("resource"), str):
            resource = resource_meta["resource"]
        supported = resource_meta.get("scopes_supported")
        scopes = tuple(s for s in supported if isinstance(s, str)) if isinstance(supported, list) else ()
    else:
        issuer = _origin(server_url)  # MCP 2025-03-26: the server's origin is its authorization server
    if challenge.get("scope"):
        scopes = tuple(challenge["scope"].split())
    data = next((d for d in map(lambda u: _get_json(http, u), authorization_metadata_urls(issuer))
                 if d is not None), None)
    if data is None:
        if resource_meta is not None:
            raise DiscoveryError(f"no authorization server metadata at {issuer}")
        data = {key: urljoin(issuer + "/", path) for key, path in
                (("authorization_endpoint", "authorize"), ("token_endpoint", "token"),
                 ("registration_endpoint", "register"))}
    data = parse_authorization_metadata(data, issuer)
    registration = data.get("registration_endpoint")
    methods = data.get("token_endpoint_auth_methods_supported")
    return Discovered(resource, str(data.get("issuer") or issuer), data["authorization_endpoint"],
                      data["token_endpoint"], registration if isinstance(registration, str) else None, scopes,
                      tuple(m for m in methods if isinstance(m, str)) if isinstance(methods, list) else ())
