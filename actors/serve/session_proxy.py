"""Legacy sessions in a cluster: each session id names the instance that owns it, and a request
for a session that lands on another instance is passed to its owner, streamed through.

A legacy session (Streamable HTTP's Mcp-Session-Id, or /sse's session_id) lives in one instance's
memory, so its id starts with that instance's tag: `<tag>.<random>`. A load balancer can route by
the tag (config/haproxy.cfg does); when one does not, the instance a request reaches looks the tag
up in the instance registry in Redis and proxies the request to the owner's advertised URL with
the cluster secret (so the owner lets it in past serve.auth_token) and a loop guard header (so a
proxied request is answered where it lands, never passed on again). An owner that is gone (no
registry entry, or refusing connections) means a 404: the client initializes again, anywhere.
"""
from __future__ import annotations

import re
import time
from typing import Any, Callable, Iterator

import requests
from loguru import logger

from actors.cluster.instances import read_instances
from actors.cluster.link import LinkDown
from actors.protocol import jsonrpc
from actors.serve.listener import watch_hangup
from actors.supervision.placing import TOKEN_HEADER

PROXIED_HEADER = "X-Troupe-Proxied"  # the loop guard: a request carrying it is never proxied again
# What travels to the owner: what MCP reads, never the client's Authorization, Host or Origin
# (the owner is let in by the cluster secret, and checks Host against its own address).
# Authorization goes along: the owner serves the session only to the client that opened it.
FORWARDED = ("Content-Type", "Accept", "Mcp-Session-Id", "MCP-Protocol-Version", "Last-Event-ID", "Authorization")
PASSED_BACK = ("content-type", "mcp-session-id", "cache-control", "x-accel-buffering", "retry-after", "allow")
OWNER_CACHE_S = 2.0  # a tag's URL is re-read from Redis this often (a dead owner also drops it at once)
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 960.0  # above the owner's own reply timeout (900 s); its streams send keep-alives
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")

Response = tuple[str, list, Any]


def instance_tag(instance: str) -> str:
    """The instance name as it appears in session ids: URL-, header- and HAProxy-safe (no dot, so
    the id's first dot ends it). Instance names are at most 64 characters of A-Za-z0-9_.:-."""
    return _UNSAFE.sub("-", instance)[:64]


def tag_of(session_id: str) -> str | None:
    """The owner tag of a clustered session id; None for a single troupe's ids (they have no dot)."""
    tag, dot, _ = session_id.partition(".")
    return tag if dot and tag else None


def _header(environ, name: str) -> str | None:
    return environ.get("HTTP_" + name.upper().replace("-", "_"))


class SessionProxy:
    """Decides, per request with a session id, whether this instance owns the session, and if not
    passes the request to its owner. Holds only a short cache of tag → owner URL."""

    def __init__(self, runtime) -> None:
        self.rt = runtime
        self.http = requests.Session()
        self.http.trust_env = False  # instance to instance: never through a proxy of the environment
        # keep-alive to the other instances: one hop, no new handshake
        self._owners: dict[str, tuple[float, str]] = {}
        self.proxied = 0  # requests passed to another instance since start, for GET /status

    @property
    def member(self):
        return self.rt.cluster

    def tag(self) -> str | None:
        """This instance's tag for new session ids; None without a cluster (or before it is named)."""
        member = self.member
        instance = member.config.instance if member is not None else None
        return instance_tag(instance) if instance else None

    def refusal(self) -> str | None:
        """Why a new legacy session cannot be made here now, or None: in a cluster a session must
        be reachable from every instance, which needs Redis up and the cluster secret known."""
        member = self.member
        if member is None:
            return None
        if member.link is None or member.token is None:
            return "this troupe has not joined its cluster yet (Redis unreachable?); retry later"
        try:
            member.link.run(lambda r: r.ping())
        except LinkDown:
            return "Redis is down: no new session can be made in this cluster now; retry later"
        return None

    def route(self, environ, session_id: str, body: bytes, gone: Callable[[], Response]) -> Response | None:
        """None when this instance should answer (its own session, or no cluster); otherwise the
        owner's answer, or `gone()` when the owner is gone, or 503 when Redis cannot say."""
        tag, mine = tag_of(session_id), self.tag()
        if tag is None or mine is None or tag == mine or _header(environ, PROXIED_HEADER) is not None:
            return None
        member = self.member
        if member is None or member.token is None:
            return _unavailable("this troupe has not joined its cluster yet; retry later")
        try:
            url = self._owner(tag)
        except LinkDown:
            return _unavailable("Redis is down: cannot find the instance that owns this session")
        if url is None:
            return gone()
        return self._forward(environ, url, body, member.token, tag, gone)

    def _owner(self, tag: str) -> str | None:
        cached = self._owners.get(tag)
        now = time.monotonic()
        if cached is not None and now - cached[0] < OWNER_CACHE_S:
            return cached[1]
        member = self.member
        assert member is not None and member.link is not None
        for entry in read_instances(member.link):
            name, url = entry.get("instance"), entry.get("url")
            if isinstance(name, str) and isinstance(url, str) and instance_tag(name) == tag:
                self._owners[tag] = (now, url)
                return url
        self._owners.pop(tag, None)
        return None

    def _forward(self, environ, base: str, body: bytes, token: str, tag: str,
                 gone: Callable[[], Response]) -> Response:
        method = environ["REQUEST_METHOD"]
        query = environ.get("QUERY_STRING") or ""
        target = base.rstrip("/") + (environ.get("PATH_INFO") or "/") + (f"?{query}" if query else "")
        headers = {name: value for name in FORWARDED if (value := _header(environ, name)) is not None}
        if "Content-Type" not in headers and environ.get("CONTENT_TYPE"):
            headers["Content-Type"] = environ["CONTENT_TYPE"]  # WSGI keeps it out of HTTP_*
        headers["Accept-Encoding"] = "identity"  # the body passes through as is
        headers[TOKEN_HEADER] = token
        headers[PROXIED_HEADER] = self.tag() or "?"
        try:
            upstream = self.http.request(method, target, data=body or None, headers=headers, stream=True,
                                         timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S), allow_redirects=False)
        except requests.RequestException as exc:
            # Refused or unreachable: the owner is gone (or going); its sessions went with it.
            self._owners.pop(tag, None)
            logger.info("http: the owner of a session ({}) cannot be reached: {}", tag, type(exc).__name__)
            return gone()
        self.proxied += 1
        status = f"{upstream.status_code} {upstream.reason or ''}".rstrip()
        passed = [(k, v) for k, v in upstream.headers.items() if k.lower() in PASSED_BACK]
        return status, passed, _relay_body(environ, upstream)


def _relay_body(environ, upstream: requests.Response) -> Iterator[bytes]:
    """The owner's body, chunk by chunk as it arrives (SSE events are not held back); a client
    that hangs up closes the connection to the owner, which ends the stream there too."""
    watcher = watch_hangup(environ, upstream.close)
    try:
        # chunk_size=None: each chunk as the owner sends it (troupe's SSE is chunked, one event each)
        for chunk in upstream.iter_content(chunk_size=None):
            if chunk:
                yield chunk
    except (requests.RequestException, OSError, ValueError, AttributeError):
        return  # the owner went away mid-stream (or the client did): the stream ends here
    except Exception as exc:  # urllib3's protocol errors: the same, the stream ends
        logger.debug("http: proxied stream ended: {}", type(exc).__name__)
    finally:
        if watcher is not None:
            watcher.kill(block=False)
        upstream.close()


def _unavailable(text: str) -> Response:
    return "503 Service Unavailable", [("Content-Type", "application/json"), ("Retry-After", "5")], \
        jsonrpc.encode(jsonrpc.error(None, jsonrpc.SERVER_UNAVAILABLE, text))
