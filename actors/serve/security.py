"""HTTP front-door checks: Host and Origin (DNS rebinding), bearer token."""
from __future__ import annotations

import hmac
from urllib.parse import parse_qs, urlsplit

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def _hostname(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):  # [::1]:8765
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """Decides whether a request may in; returns (status, reason) for a refusal, else None."""

    def __init__(self, serve_config, bound_host: str):
        self.token = serve_config.auth_token
        self.allowed_origins = {o.rstrip("/").lower() for o in serve_config.allowed_origins}
        self.allowed_hosts = {h.lower() for h in serve_config.allowed_hosts}
        bound = bound_host.lower()
        self.loopback_only = bound in LOOPBACK_NAMES or bound.startswith("127.")
        self.hosts = set(LOOPBACK_NAMES) | ({bound} if bound not in ("0.0.0.0", "::", "") else set())

    def host_ok(self, host_header: str | None) -> bool:
        if not host_header:
            return False
        name = _hostname(host_header)
        return name in self.hosts or name in self.allowed_hosts or host_header.lower() in self.allowed_hosts \
            or (name.startswith("127.") and self.loopback_only)

    def origin_ok(self, origin: str | None) -> bool:
        if origin is None:
            return True  # not a browser: nothing to rebind
        if origin.rstrip("/").lower() in self.allowed_origins or "*" in self.allowed_origins:
            return True
        try:
            host = (urlsplit(origin).hostname or "").lower()
        except ValueError:
            return False
        return host in LOOPBACK_NAMES or host.startswith("127.")

    def token_ok(self, authorization: str | None) -> bool:
        if not self.token:
            return True
        if not authorization or not authorization.lower().startswith("bearer "):
            return False
        return hmac.compare_digest(authorization[7:].strip().encode(), self.token.encode())

    def check(self, environ) -> tuple[str, str] | None:
        if not self.host_ok(environ.get("HTTP_HOST")):
            return "403 Forbidden", "Host not allowed (DNS rebinding protection)"
        if not self.origin_ok(environ.get("HTTP_ORIGIN")):
            return "403 Forbidden", "Origin not allowed"
        if not self.token_ok(environ.get("HTTP_AUTHORIZATION")) and not self._open_get(environ):
            return "401 Unauthorized", "missing or wrong bearer token"
        return None

    def _open_get(self, environ) -> bool:
        """GETs that pass without the header: the dashboard's static files, /events with ?access_token."""
        if environ.get("REQUEST_METHOD") != "GET":
            return False
        path = environ.get("PATH_INFO") or "/"
        if path in ("/", "/index.html") or path.startswith("/dashboard/"):
            return True  # static page, no data in it: it asks the user for the token
        if path == "/events" and self.token:  # EventSource cannot send an Authorization header
            given = parse_qs(environ.get("QUERY_STRING") or "").get("access_token", [""])[0]
            return hmac.compare_digest(given.encode(), self.token.encode())
        return False
