"""What both HTTP client transports share: one requests.Session with a connection pool, an
ordered outbox and its writer, callbacks guarded against late calls, a bounded close, and the
helpers that name a failed request without quoting secrets."""
from __future__ import annotations

import os

from contextlib import contextmanager
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

import gevent
import gevent.pool
import gevent.queue
import orjson
import requests
import requests.adapters
import urllib3.exceptions
from loguru import logger

from actors.ops import trace_context
from actors.protocol import jsonrpc
from actors.redact import redact_url
from actors.transports.base import NEEDS_AUTH, LinkFailure, OnClosed, OnMessage, TransportError
from actors.transports.sse_stream import shutdown_response

DEFAULT_CONNECT_TIMEOUT = 10.0
JSON_MEDIA_TYPE = "application/json"
# A POSTed message is acknowledged at once (202); a peer silent this long is gone.
POST_READ_TIMEOUT = 30.0
# How much of a failed response's body we read to quote the server's reason.
ERROR_BODY_LIMIT = 4096
ERROR_SNIPPET = 200
# close() gives readers this long to notice their shut-down socket, then kills
# whatever is left (a POST still waiting for its headers has no socket we can reach).
CLOSE_GRACE = 0.3
CLOSE_KILL_TIMEOUT = 0.3
_DEFAULT_PORTS = {"http": 80, "https": 443}
# on_closed's reason when the owner itself called close() (as stdio says it).
CLOSED_BY_OWNER = "closed by troupe"
# A 401 that raced a refresh waits this long for the new token (the token request is in flight).
REFRESH_WAIT = 5.0
SIGN_IN_LINK_WAIT = 5.0  # a per_client request refused for want of a sign-in waits this long for the link
POOL_SIZE = 128  # at least a server's max_in_flight (default 64) plus its streams


def origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


def media_type(resp: requests.Response) -> str:
    return resp.headers.get("Content-Type", "").split(";")[0].strip().lower()


def describe_exc(exc: BaseException) -> str:
    """Name a request failure without quoting requests' message, which repeats the
    URL with its query string (where a token may live)."""
    if isinstance(exc, requests.Timeout):
        return "timed out"
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.strerror:
            return f"{type(exc).__name__} ({cause.strerror})"
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "reason", None)
        if not isinstance(cause, BaseException):
            break
    return type(exc).__name__


def link_broken(exc: BaseException) -> bool | None:
    """For a request that failed below HTTP: False if it never left troupe (the connection was
    refused or not made in time), True if the link broke with it out (it may have arrived); None
    when the failure says nothing of the link (a read timeout, a bad URL)."""
    if isinstance(exc, requests.ConnectTimeout):
        return False
    if not isinstance(exc, requests.ConnectionError):
        return None
    seen: set[int] = set()
    cause: object = exc
    while isinstance(cause, BaseException) and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError)):
            return False
        cause = getattr(cause, "reason", None) or (cause.args[0] if cause.args else None) \
            or cause.__cause__ or cause.__context__
    return True


def error_detail(resp: requests.Response) -> str:
    """`HTTP 400 Bad Request: <the server's JSON-RPC error message>`, body bounded."""
    detail = f"HTTP {resp.status_code} {resp.reason or ''}".rstrip()
    try:
        body = resp.raw.read(ERROR_BODY_LIMIT, decode_content=True)
        error = orjson.loads(body).get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            detail += f": {error['message'][:ERROR_SNIPPET]}"
    except Exception:  # an HTML page, a broken body: the status line says enough
        pass
    return detail


def request_failed(name: str, request_id: Any, detail: str, status: int | None = None) -> dict:
    """The synthetic answer for a request the server will never answer."""
    data = {"httpStatus": status} if status else None
    return jsonrpc.error(request_id, jsonrpc.SERVER_UNAVAILABLE, f"{name}: {detail}", data)


def lean_session(url: str) -> requests.Session:
    """A requests.Session that reads the environment once, here, instead of on every request:
    with trust_env on, each call looked up proxies, no_proxy and ~/.netrc again, which was half
    of requests' CPU per call on these machines (1.1 ms against 0.6 ms). Proxy variables and a
    CA bundle variable still apply; ~/.netrc credentials are never added to a server's requests."""
    session = requests.Session()
    session.trust_env = False
    session.proxies.update(requests.utils.get_environ_proxies(url))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    return session


class HttpTransportBase:
    """What both HTTP transports share: one requests.Session, an ordered outbox,
    callbacks guarded against late calls, reader bookkeeping and a bounded close."""

    def __init__(self, name: str, url: str, headers: Mapping[str, str], on_message: OnMessage,
                 on_closed: OnClosed, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, log=logger,
                 auth=None, auth_settings=None, client_header: str | None = None):
        self.name = name
        # a relay to another troupe: the header that names the client a request is sent for
        self._client_header = client_header
        # actors.auth.access.UpstreamAuthAccess (None: no OAuth, e.g. an Authorization header is configured)
        self._auth, self._auth_settings = auth, auth_settings
        self.url = url
        self._headers = dict(headers)
        self._on_message = on_message
        self._on_closed = on_closed
        self._connect_timeout = connect_timeout
        self._log = log.bind(server=name)
        self._http = lean_session(url)
        # One keep-alive connection per concurrent call: the default pool of 10 made a busy
        # upstream open (and discard) a new TCP connection for every call past the tenth.
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=POOL_SIZE)
        self._http.mount("http://", adapter)
        self._http.mount("https://", adapter)
        self._greenlets = gevent.pool.Group()
        self._streams: set[requests.Response] = set()
        self._outbox: gevent.queue.Queue = gevent.queue.Queue()
        self._writer: gevent.Greenlet | None = None
        self._closing = False
        self._gone: str | None = None
        # request id → the client whose own credentials it carries (`auth: per_client`), until sent
        self._clients: dict[Any, str] = {}

    def send(self, message: dict, client: str | None = None) -> None:
        if self._closing:
            raise TransportError(f"{self.name}: transport closed")
        if self._gone:
            raise TransportError(f"{self.name}: {self._gone}")
        # One writer keeps messages in order (initialized before the next request);
        # what may take long (a request's answer) runs in its own greenlet.
        if self._writer is None:
            self._writer = self._greenlets.spawn(self._write_loop)
        if client is not None and jsonrpc.is_request(message):
            self._clients[message["id"]] = client
        self._outbox.put(message)

    def describe(self) -> dict:
        return {"url": redact_url(self.url)}

    def _check_open(self) -> None:
        if self._closing:
            raise TransportError(f"{self.name}: transport closed")
        parts = urlsplit(self.url)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise TransportError(f"{self.name}: not an http(s) URL: {redact_url(self.url)}")

    def close(self) -> None:
        self._release()
        # Same contract as the stdio transport: on_closed exactly once, also when
        # the owner closed us, so the owner has one place where a link ends.
        self._closing_reported()

    def _release(self) -> None:
        """Stop every greenlet, close every response and the session; idempotent."""
        if self._closing:
            return
        self._closing = True
        me = gevent.getcurrent()
        if self._writer is not None and self._writer is not me:
            self._writer.kill(block=False)
        for resp in list(self._streams):
            shutdown_response(resp)
        others = [g for g in self._greenlets if g is not me]
        gevent.joinall(others, timeout=CLOSE_GRACE)
        gevent.killall([g for g in others if not g.dead], block=True, timeout=CLOSE_KILL_TIMEOUT)
        for resp in list(self._streams):
            resp.close()
        self._streams.clear()
        self._end_session()
        self._http.close()

    # -- OAuth ---------------------------------------------------------------------

    def _client_of(self, message: dict | None) -> str | None:
        """The client a request is sent for with its own credentials (auth: per_client), or None."""
        return self._clients.get(message.get("id")) if message is not None and "method" in message else None

    def _sent(self, message: dict) -> None:
        """The request is out (or failed): its client's credentials are needed no more."""
        if "method" in message:
            self._clients.pop(message.get("id"), None)

    def _with_bearer(self, headers: dict, message: dict | None = None) -> dict:
        """The current bearer, read from the AuthKeeper's box on every request: troupe's own, or
        for a request sent for a client of a per_client server that client's own (or none); and a
        request's trace context, its _meta's mirrored in the W3C headers (actors/ops/trace_context)."""
        if message is not None:
            headers.update(trace_context.headers_of(message))
        client = self._client_of(message)
        if client is not None and self._client_header:
            headers[self._client_header] = client
        token = self._auth.bearer(self.url, client) if self._auth is not None else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def _fresh(self, send: Callable[[], requests.Response], client: str | None = None) -> requests.Response:
        """send() once more, with the new bearer, when a 401 answered a request whose bearer a refresh
        was replacing meanwhile (the provider revokes the old one as it issues the new): the caller's
        request is not lost to that race. Waits for a refresh in flight at most REFRESH_WAIT."""
        resp = send()
        if resp.status_code != 401 or self._auth is None:
            return resp
        if not self._auth.renewed(self.url, resp.request.headers.get("Authorization"), REFRESH_WAIT, client):
            return resp
        resp.close()
        return send()

    def _client_refused(self, message: dict, resp: requests.Response) -> bool:
        """A 401 to a request sent for a per_client server's client: that client signs in, the link
        stays up for everyone else, and the request is answered with the client's sign-in link."""
        client = self._client_of(message)
        if client is None or resp.status_code != 401 or self._auth is None:
            return False
        sent = resp.request.headers.get("Authorization")
        sent = sent.decode("latin-1") if isinstance(sent, bytes) else sent
        self._auth.unauthorized(self.name, self.url, resp.headers.get("WWW-Authenticate"), sent,
                                self._auth_settings, client)
        self._greenlets.spawn(self._answer_sign_in, message, client, sent)  # never hold the writer for the link
        return True

    def _answer_sign_in(self, message: dict, client: str, sent: str | None) -> None:
        assert self._auth is not None  # only _client_refused spawns this
        link = self._auth.sign_in_link(self.url, client, SIGN_IN_LINK_WAIT, sent)
        if link.pop("refreshed", False):  # the keeper refreshed the refused token: no sign-in needed
            self._deliver(jsonrpc.error(message["id"], jsonrpc.SERVER_UNAVAILABLE,
                                        f"{self.name}: client {client}'s token was refused and has just been "
                                        "refreshed: call again", {"httpStatus": 401}))
            return
        how = (f"open {link['auth_url']}" if link.get("auth_url") else
               f"the sign-in cannot start: {link['auth_error']}" if link.get("auth_error") else
               f"run `troupe auth {self.name} --client {client}`")
        detail = f"client {client} must sign in to this server with its own account first: {how}"
        self._deliver(jsonrpc.error(message["id"], jsonrpc.SERVER_UNAVAILABLE, f"{self.name}: {detail}",
                                    {"httpStatus": 401, "needs_auth": {"name": self.name, **link}}))

    def unauthorized_reason(self, resp: requests.Response) -> str | None:
        """On a 401 from a server troupe may sign in to: tell the AuthKeeper (with the challenge and
        the refused token's fingerprint) and return the needs-auth reason; else None."""
        if resp.status_code != 401 or self._auth is None:
            return None
        challenge = resp.headers.get("WWW-Authenticate")
        self._auth.unauthorized(self.name, self.url, challenge, resp.request.headers.get("Authorization"),
                                self._auth_settings)
        return f"{NEEDS_AUTH}: HTTP 401 from {redact_url(self.url)}"

    def _needs_auth(self, resp: requests.Response, message: dict | None = None) -> bool:
        """A 401 ends the link as needs-auth (the owner fails what is pending); True if it was one.
        A 401 to one client's own request is that client's alone (it is answered, the link stays)."""
        if message is not None and self._client_refused(message, resp):
            return True
        reason = self.unauthorized_reason(resp)
        if reason is None:
            return False
        self._report_closed(reason)
        return True

    # -- for subclasses ---------------------------------------------------------

    def _dispatch(self, message: dict) -> None:
        raise NotImplementedError

    def _end_session(self) -> None:
        """Tell the server we are done, if the transport has a way to."""

    def _write_loop(self) -> None:
        while True:
            message = self._outbox.get()
            try:
                self._dispatch(message)
            except Exception as exc:  # the writer must outlive one bad message
                self._log.opt(exception=exc).error("sending {} failed", _label(message))
                self._fail(message, f"could not send: {type(exc).__name__}")

    def _deliver(self, message: Any) -> None:
        if self._closing:  # the owner let go of us; it answers its pending requests itself
            return
        try:
            self._on_message(message)
        except Exception as exc:
            self._log.opt(exception=exc).error("on_message callback failed")

    def _report_closed(self, reason: str) -> None:
        """The link is gone (session expired, stream lost): on_closed, once."""
        if self._closing or self._gone:
            return  # after close() began, close() reports
        self._gone = reason
        self._log.warning("transport lost: {}", reason)
        self._call_on_closed(reason)

    def _closing_reported(self) -> None:
        if not self._gone:
            self._gone = CLOSED_BY_OWNER
            self._call_on_closed(CLOSED_BY_OWNER)

    def _call_on_closed(self, reason: str) -> None:
        try:
            self._on_closed(reason)
        except Exception as exc:
            self._log.opt(exception=exc).error("on_closed callback failed")

    def _fail(self, message: dict, detail: str, status: int | None = None, broken: bool | None = None) -> None:
        """A request gets exactly one answer even when HTTP failed; the rest is logged. `broken`
        (see link_broken) makes the answer a LinkFailure, which says whether it was sent."""
        if jsonrpc.is_request(message) and broken is not None:
            self._deliver(LinkFailure(message["id"], f"{self.name}: {detail}", broken))
        elif jsonrpc.is_request(message):
            self._deliver(request_failed(self.name, message["id"], detail, status))
        else:
            self._log.warning("{} not delivered: {}", _label(message), detail)

    @contextmanager
    def _tracked(self, resp: requests.Response):
        """Keep resp where close() can shut it down; close it whatever happens."""
        self._streams.add(resp)
        try:
            yield resp
        finally:
            self._streams.discard(resp)
            resp.close()


def _label(message: dict) -> str:
    return str(message.get("method") or "response")
