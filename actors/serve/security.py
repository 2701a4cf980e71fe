"""HTTP front-door checks: Host and Origin by equality (DNS rebinding), dashboard actions, bearer token."""
from __future__ import annotations

import hmac
from typing import Callable
from urllib.parse import parse_qs

from actors.loopback import is_loopback

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARD_BINDS = ("", "0.0.0.0", "::", "[::]")  # every interface: not a name a client can use
HTTP_DEFAULT_PORT = 80  # a Host or Origin without a port means this one
ACTION_PREFIX = "/api/"  # every state-changing dashboard route lives here, and inherits its rule
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
MEMBER_TOKEN_ENVIRON = "HTTP_X_TROUPE_CLUSTER_TOKEN"  # placing.TOKEN_HEADER as WSGI spells it
CLIENT_KEY = "troupe.client"  # the environ key the Guard leaves the request's ClientEntry under
MCP_PATHS = ("/mcp", "/sse", "/messages")  # where serve.clients' tokens open the door
REFUSED_FETCH_SITES = ("cross-site", "same-site")  # a sibling subdomain is not the dashboard either


def bracketed(host: str) -> str:
    """An IPv6 literal as it appears in Host and URLs ([::1]); other names unchanged, lowercased."""
    host = host.strip().lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host



def exposure_refusal(serve_config) -> str | None:
    """Why serving HTTP on this address is refused, or None: beyond loopback, a token is required."""
    if serve_config.transport != "http" or is_loopback(serve_config.host) or serve_config.auth_token \
            or serve_config.clients:
        return None
    return (f"refusing to serve HTTP on {serve_config.host or 'every interface'} without a bearer token: "
            "set serve.auth_token (or TROUPE_AUTH_TOKEN), or bind 127.0.0.1")


def _split_entry(entry: str) -> tuple[str, int | None]:
    """An allowed_hosts entry: `name` (any port troupe is bound to) or `name:port` (that port only)."""
    entry = entry.strip().lower()
    if entry.startswith("["):
        name, _, rest = entry.partition("]")
        return name + "]", int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return (name, int(port)) if port.isdigit() else (entry, None)
    return bracketed(entry), None


def _origin(value: str) -> str:
    return value.strip().lower().rstrip("/")


class Guard:
    """Decides whether a request may in; `check` returns (status, reason) for a refusal, else None.

    `bound_port` is the port troupe listens on; None when a host app serves troupe (embedding),
    and then each request's SERVER_PORT (the port the host's server accepted it on) stands in.
    """

    def __init__(self, serve_config, bound_host: str, bound_port: int | None = None):
        self.token = serve_config.auth_token
        self.clients = tuple(serve_config.clients)  # ClientEntry each: a token names one client
        # In a cluster: the secret instances present to each other (None until joined), which
        # lets a session request proxied from another instance past the clients' bearer token.
        self.member_token: Callable[[], str | None] = lambda: None
        self.bound_port = bound_port
        self.allowed_origins = frozenset(_origin(o) for o in serve_config.allowed_origins)
        names: set[str] = set(LOOPBACK_NAMES)
        bound = bracketed(bound_host or "")
        if bound not in WILDCARD_BINDS:
            names.add(bound)  # the address troupe bound itself (an IP literal cannot be rebound)
        self.exact_hosts: set[str] = set()  # allowed_hosts given as name:port
        for entry in serve_config.allowed_hosts:
            name, port = _split_entry(entry)
            if port is None:
                names.add(name)
            else:
                self.exact_hosts.add(f"{name}:{port}")
        self.names = frozenset(names)

    def hosts(self, port: int | None) -> set[str]:
        """Every Host value let in when serving on `port`; Origins are these behind http://."""
        out = set(self.exact_hosts)
        if port is not None:
            out |= {f"{name}:{port}" for name in self.names}
            if port == HTTP_DEFAULT_PORT:  # browsers leave the default port out of Host and Origin
                out |= self.names
        return out

    def port_of(self, environ) -> int | None:
        if self.bound_port is not None:
            return self.bound_port
        try:
            return int(environ.get("SERVER_PORT") or "")
        except ValueError:
            return None

    def host_ok(self, host_header: str | None, port: int | None) -> bool:
        return bool(host_header) and host_header.strip().lower() in self.hosts(port)

    def origin_ok(self, origin: str | None, port: int | None) -> bool:
        if origin is None:
            return True  # not a browser: nothing to rebind
        origin = _origin(origin)
        return origin in self.allowed_origins or origin in {f"http://{h}" for h in self.hosts(port)}

    def token_ok(self, authorization: str | None) -> bool:
        if not self.token:
            return True
        return _bearer_is(authorization, self.token)

    def client_of(self, authorization: str | None):
        """The serve.clients entry whose token the request carries, or None. Every token is
        compared (in constant time each), so the time taken does not say which one matched."""
        found = None
        for client in self.clients:
            if _bearer_is(authorization, client.token) and found is None:
                found = client
        return found

    def _door(self, environ) -> bool:
        """The bearer rule: with serve.clients, the MCP endpoints take a client's token (or the
        operator's, serve.auth_token) and the operator's routes take the operator's token alone.
        Without clients, the one token (if any) opens everything."""
        authorization = environ.get("HTTP_AUTHORIZATION")
        if not self.clients:
            return self.token_ok(authorization)
        client = self.client_of(authorization)
        if client is not None:
            environ[CLIENT_KEY] = client
        if self.token and _bearer_is(authorization, self.token):
            return True
        # A client's token opens the MCP endpoints only: status, metrics, events and approvals show
        # and change what lies beyond its profile, so they are the operator's (serve.auth_token;
        # without one they stay shut while clients are named).
        return client is not None and (environ.get("PATH_INFO") or "/") in MCP_PATHS

    def check(self, environ) -> tuple[str, str] | None:
        port = self.port_of(environ)
        if not self.host_ok(environ.get("HTTP_HOST"), port):
            return "403 Forbidden", "Host not allowed (DNS rebinding protection)"
        if not self.origin_ok(environ.get("HTTP_ORIGIN"), port):
            return "403 Forbidden", "Origin not allowed"
        refusal = self._action_refusal(environ)
        if refusal is not None:
            return "403 Forbidden", refusal
        if not self._door(environ) and not self._open_get(environ) and not self._member(environ):
            if self.clients and (environ.get("PATH_INFO") or "/") not in MCP_PATHS:
                return "401 Unauthorized", ("this route is the operator's: it takes serve.auth_token (a client's "
                                            "token opens /mcp, /sse and /messages only)")
            return "401 Unauthorized", "missing or wrong bearer token"
        return None

    def _member(self, environ) -> bool:
        """Another instance of this cluster, passing on a request for a session this one owns."""
        given, token = environ.get(MEMBER_TOKEN_ENVIRON), self.member_token()
        if not given or not token:
            return False
        return hmac.compare_digest(given.encode(), token.encode())

    def _action_refusal(self, environ) -> str | None:
        """Dashboard actions come from the dashboard's own page only: same origin, never cross-site."""
        path = environ.get("PATH_INFO") or "/"
        if environ.get("REQUEST_METHOD") in SAFE_METHODS or not (path + "/").startswith(ACTION_PREFIX):
            return None
        if (environ.get("HTTP_SEC_FETCH_SITE") or "").strip().lower() in REFUSED_FETCH_SITES:
            return "cross-site dashboard action refused"
        origin = environ.get("HTTP_ORIGIN")
        # Host already passed the check above, so its origin is one troupe answers for.
        if origin is None or _origin(origin) != "http://" + environ["HTTP_HOST"].strip().lower():
            return f"dashboard actions need the dashboard's own Origin (POST {ACTION_PREFIX}… from its page)"
        return None

    def _open_get(self, environ) -> bool:
        """GETs that pass without the header: the dashboard's static files, /events with ?access_token."""
        if environ.get("REQUEST_METHOD") != "GET":
            return False
        path = environ.get("PATH_INFO") or "/"
        if path in ("/", "/index.html") or path.startswith("/dashboard/"):
            return True  # static page, no data in it: it asks the user for the token
        if path == "/oauth/callback":
            return True  # a browser back from a sign-in; the route acts only on a state it is waiting for
        if path == "/events" and self.token:  # EventSource cannot send an Authorization header
            given = "Bearer " + parse_qs(environ.get("QUERY_STRING") or "").get("access_token", [""])[0]
            return _bearer_is(given, self.token)
        return False


def _bearer_is(authorization: str | None, token: str) -> bool:
    if not authorization or not authorization.lower().startswith("bearer "):
        return False
    return hmac.compare_digest(authorization[7:].strip().encode(), token.encode())
