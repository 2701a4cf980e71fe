"""Which URLs an OAuth sign-in may fetch or send to on a protected server's behalf, and when two
URLs name the same thing: the security rules of RFC 9728, RFC 8414, RFC 9207 and the MCP
authorization spec. Pure functions; a `Refused` names the rule broken, never the URL (the
message is shown to clients as `auth_error`, and the URL came from someone else's server).

- Protected-resource metadata is fetched from the server's own origin or from an `https` URL.
- Its `resource` is the server's URL: the canonical forms are compared (scheme and host
  lower-case, default port dropped, no query or fragment); a trailing slash does not count, and
  a resource that is a parent path of the server's URL on the same origin is accepted (RFC 9728
  lets one resource identifier cover the paths below it, as the MCP python SDK does).
- The authorization server, its metadata and its endpoints are `https`, except that when the
  MCP server is on a loopback address, `http` on exactly its origin is allowed.
- The authorization server's metadata names the issuer it was fetched for (RFC 8414 §3.3,
  a trailing slash aside); an authorization response's `iss` equals that issuer (RFC 9207).
- A redirect is followed only to the same origin.
"""
from __future__ import annotations

from urllib.parse import urljoin, urlsplit, urlunsplit

from actors.loopback import is_loopback as host_is_loopback

DEFAULT_PORTS = {"http": 80, "https": 443}
Origin = tuple[str, str, int]


class Refused(Exception):
    """A URL the rules forbid; the message names the rule, never the URL."""


def origin(url: str) -> Origin:
    """(scheme, host, port) of an absolute http(s) URL, lower-case, with the default port filled
    in; Refused for anything else (another scheme, no host, a bad port, user info)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except (ValueError, TypeError, AttributeError):
        raise Refused("not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise Refused("not an http(s) URL")
    if not parts.hostname:
        raise Refused("a URL without a host")
    if "@" in parts.netloc:  # user info in a fetched URL only serves to disguise its host
        raise Refused("a URL with user info")
    return scheme, parts.hostname.lower(), port if port is not None else DEFAULT_PORTS[scheme]


def same_origin(a: str, b: str) -> bool:
    """Same scheme, host and port (RFC 6454), default ports filled in; False if either is no URL."""
    try:
        return origin(a) == origin(b)
    except Refused:
        return False


def is_loopback(url: str) -> bool:
    """The URL's host is `localhost` or a loopback IP literal (127.0.0.0/8, ::1)."""
    try:
        host = origin(url)[1]
    except Refused:
        return False
    return host_is_loopback(host)


def canonical(url: str) -> str:
    """The MCP canonical server URI (RFC 8707 §2): scheme and host lower-case, the default port
    dropped, no query or fragment; the path as given."""
    scheme, host, port = origin(url)
    shown = f"[{host}]" if ":" in host else host
    netloc = shown if port == DEFAULT_PORTS[scheme] else f"{shown}:{port}"
    return urlunsplit((scheme, netloc, urlsplit(url).path, "", ""))


def _path(url: str) -> str:
    return urlsplit(url).path.rstrip("/")


def resource_matches(resource: str, server_url: str) -> bool:
    """RFC 9728 §3.3: the metadata's `resource` is the server's URL (canonical forms, a trailing
    slash aside), or a parent path of it on the same origin."""
    if not same_origin(resource, server_url):
        return False
    mine, theirs = _path(server_url), _path(resource)
    return mine == theirs or mine.startswith(theirs + "/")


def check_resource_metadata_url(url: str, server_url: str) -> None:
    """Where protected-resource metadata may be fetched: the server's origin, or any https URL."""
    if not same_origin(url, server_url) and origin(url)[0] != "https":
        raise Refused("the 401 names resource metadata on another origin without https "
                      "(allowed: the server's own origin, or an https URL)")


def check_authorization_url(url: str, server_url: str, what: str) -> None:
    """An authorization server, its metadata or one of its endpoints (`what` names it): https, or
    http on exactly the server's origin when the server is on a loopback address."""
    try:
        scheme = origin(url)[0]
    except Refused as exc:
        raise Refused(f"the {what} is {exc}") from None
    if scheme == "https" or (is_loopback(server_url) and same_origin(url, server_url)):
        return
    raise Refused(f"the {what} is not https (plain http only on the server's own origin, "
                  "and only when that is a loopback address)")


def issuer_matches(issuer: object, expected: str) -> bool:
    """RFC 8414 §3.3: the metadata's `issuer` is the authorization server it was fetched for
    (canonical forms; a trailing slash does not count: "https://as/" names "https://as")."""
    if not isinstance(issuer, str):
        return False
    try:
        return canonical(issuer).rstrip("/") == canonical(expected).rstrip("/")
    except Refused:
        return False


def iss_refusal(iss: str | None, issuer: str, required: bool) -> str | None:
    """RFC 9207 §2.4: why an authorization response's `iss` refuses its code, or None. A present
    `iss` must equal the issuer (simple string comparison); a missing one refuses the code only
    where the server advertised `authorization_response_iss_parameter_supported`."""
    if iss is None:
        return "the authorization response has no iss, which its server promised (RFC 9207)" if required else None
    if iss != issuer:
        return "the authorization response names another issuer (RFC 9207): its code was not used"
    return None


def check_redirect(location: str | None, from_url: str) -> str:
    """The absolute target of a redirect, if it stays on `from_url`'s origin; Refused otherwise."""
    if not location:
        raise Refused("a redirect without a target")
    target = urljoin(from_url, location)
    if not same_origin(target, from_url):
        raise Refused("a redirect to another origin was not followed")
    return target
