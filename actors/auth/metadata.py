"""Where an upstream's authorization server is and what it offers: RFC 9728 protected-resource
metadata, RFC 8414 / OpenID Connect discovery, with the MCP spec's fallbacks (2025-03-26: the
server's own origin with /authorize, /token and /register). Every URL it fetches or returns
passed the rules of actors/auth/url_rules.py; no error message holds a fetched value."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests

from actors.auth import url_rules

METADATA_TIMEOUT = 10.0  # each metadata GET; a sign-in waits for a person anyway, not for this
MAX_METADATA_BYTES = 256 * 1024  # a metadata document is a few hundred bytes; more is not read
MAX_REDIRECTS = 3  # same-origin redirects followed per metadata GET
MAX_SCOPES = 32
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]{1,200}")
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
    iss_required: bool = False  # authorization_response_iss_parameter_supported (RFC 9207)


def challenge_params(header: str | None) -> dict[str, str]:
    """The parameters of a `WWW-Authenticate: Bearer k="v", …` challenge (lower-case keys)."""
    if not header:
        return {}
    scheme, _, rest = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return {}
    return {m.group(1).lower(): (m.group(2) if m.group(2) is not None else m.group(3)) for m in _PARAM.finditer(rest)}


def canonical_resource(url: str) -> str:
    """RFC 8707 / MCP canonical URI: scheme and host lower-case, default port dropped, no
    fragment, no query."""
    return url_rules.canonical(url)


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


class NoRedirects(requests.Session):
    """A requests session that follows no redirect by itself (the caller decides, by the rules)."""

    def get_redirect_target(self, resp):
        return None


def _get_json(http: requests.Session, url: str) -> dict | None:
    """The JSON object at `url`, following redirects within its origin only (Refused for one
    that leaves it); None when there is none to read."""
    for _ in range(MAX_REDIRECTS + 1):
        try:
            resp = http.get(url, headers={"Accept": "application/json"}, timeout=METADATA_TIMEOUT,
                            allow_redirects=False, stream=True)
        except requests.RequestException:
            return None
        with resp:
            if resp.is_redirect:
                url = url_rules.check_redirect(resp.headers.get("Location"), url)
                continue
            if resp.status_code != 200:
                return None
            raw = resp.raw.read(MAX_METADATA_BYTES + 1, decode_content=True)
        if len(raw) > MAX_METADATA_BYTES:
            return None
        try:
            body = json.loads(raw)
        except ValueError:
            return None
        return body if isinstance(body, dict) else None
    raise url_rules.Refused(f"more than {MAX_REDIRECTS} redirects")


def _check(url: object, server_url: str, what: str) -> str:
    if not isinstance(url, str):
        raise DiscoveryError(f"the authorization server's metadata has no {what}")
    try:
        url_rules.check_authorization_url(url, server_url, f"authorization server's {what}")
    except url_rules.Refused as exc:
        raise DiscoveryError(f"sign-in refused: {exc}") from None
    return url


def parse_authorization_metadata(data: dict[str, Any], server_url: str) -> dict[str, Any]:
    """Check RFC 8414 metadata: the endpoints a code flow needs are present and pass the URL
    rules (so does a registration endpoint, if named), and PKCE S256 is offered."""
    for key in ("authorization_endpoint", "token_endpoint"):
        _check(data.get(key), server_url, key)
    if data.get("registration_endpoint") is not None:
        _check(data["registration_endpoint"], server_url, "registration_endpoint")
    methods = data.get("code_challenge_methods_supported")
    if isinstance(methods, list) and "S256" not in methods:
        # the spec forbids going on without it
        raise DiscoveryError("the authorization server does not support PKCE S256")
    return data


def _scopes(value: object) -> tuple[str, ...]:
    """Scope tokens (RFC 6749 §3.3 characters) of a list or a space-separated string; others dropped."""
    items = value.split() if isinstance(value, str) else value if isinstance(value, list) else []
    return tuple(s for s in items if isinstance(s, str) and _SCOPE.fullmatch(s))[:MAX_SCOPES]


def _resource_metadata(http: requests.Session, server_url: str, challenge: dict[str, str]) -> dict | None:
    named = challenge.get("resource_metadata")
    if named:  # the spec: use the 401's URL when there is one, so a forbidden one ends the sign-in
        url_rules.check_resource_metadata_url(named, server_url)
    for url in resource_metadata_urls(server_url, challenge):
        found = _get_json(http, url)
        if found is not None:
            return found
    return None


def _authorization_server(resource_meta: dict, server_url: str) -> str:
    """The protected-resource metadata's first authorization server that passes the rules, once
    its `resource` is known to be this server's."""
    resource = resource_meta.get("resource")
    if not isinstance(resource, str) or not url_rules.resource_matches(resource, server_url):
        raise url_rules.Refused("the protected-resource metadata is for another resource than this "
                                "server's URL (RFC 9728 section 3.3)")
    servers = resource_meta.get("authorization_servers")
    if not isinstance(servers, list) or not any(isinstance(s, str) for s in servers):
        raise DiscoveryError("protected-resource metadata names no authorization server")
    refusal = None
    for issuer in (s for s in servers if isinstance(s, str)):
        try:
            url_rules.check_authorization_url(issuer, server_url, "authorization server")
            return issuer
        except url_rules.Refused as exc:
            refusal = refusal or exc
    raise refusal or DiscoveryError("protected-resource metadata names no authorization server")


def discover(http: requests.Session, server_url: str, challenge: dict[str, str]) -> Discovered:
    """Read the protected-resource metadata, then the authorization server's, by the URL rules
    (actors/auth/url_rules.py); blocking (a greenlet). DiscoveryError says why not."""
    try:
        return _discover(http, server_url, challenge)
    except url_rules.Refused as exc:
        raise DiscoveryError(f"sign-in refused: {exc}") from None


def _discover(http: requests.Session, server_url: str, challenge: dict[str, str]) -> Discovered:
    resource_meta = _resource_metadata(http, server_url, challenge)
    resource = canonical_resource(server_url)
    scopes: tuple[str, ...] = ()
    if resource_meta is not None:
        issuer = _authorization_server(resource_meta, server_url)
        resource = canonical_resource(resource_meta["resource"])  # checked: this server's, rebuilt from its parts
        scopes = _scopes(resource_meta.get("scopes_supported"))
    else:
        issuer = _origin(server_url)  # MCP 2025-03-26: the server's origin is its authorization server
    if challenge.get("scope"):
        scopes = _scopes(challenge["scope"])
    data = next((d for d in map(lambda u: _get_json(http, u), authorization_metadata_urls(issuer))
                 if d is not None), None)
    if data is None:
        if resource_meta is not None:
            raise DiscoveryError("no authorization server metadata at the server the protected-resource "
                                 "metadata names")
        data = {key: urljoin(issuer + "/", path) for key, path in
                (("authorization_endpoint", "authorize"), ("token_endpoint", "token"),
                 ("registration_endpoint", "register"))}
        data["issuer"] = issuer
    elif not url_rules.issuer_matches(data.get("issuer"), issuer):
        raise url_rules.Refused("the authorization server's metadata names another issuer than the "
                                "server it was fetched for (RFC 8414 section 3.3)")
    data = parse_authorization_metadata(data, server_url)
    registration = data.get("registration_endpoint")
    methods = data.get("token_endpoint_auth_methods_supported")
    return Discovered(resource, str(data["issuer"]), data["authorization_endpoint"],
                      data["token_endpoint"], registration if isinstance(registration, str) else None, scopes,
                      tuple(m for m in methods if isinstance(m, str)) if isinstance(methods, list) else (),
                      data.get("authorization_response_iss_parameter_supported") is True)
