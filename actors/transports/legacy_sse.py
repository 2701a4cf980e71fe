"""The legacy HTTP+SSE client transport (MCP 2024-11-05): GET an event stream, POST to its endpoint."""
from __future__ import annotations

from typing import Mapping
from urllib.parse import urljoin

import gevent
import gevent.event
import requests
from loguru import logger

from actors.protocol import jsonrpc
from actors.redact import redact_url
from actors.transports.base import OnClosed, OnMessage, TransportError
from actors.transports.http_base import (
    DEFAULT_CONNECT_TIMEOUT,
    JSON_MEDIA_TYPE,
    POST_READ_TIMEOUT,
    HttpTransportBase,
    describe_exc,
    error_detail,
    media_type,
    origin,
)
from actors.transports.sse_stream import SSE_MEDIA_TYPE, parse_payload, sse_events


class SseTransport(HttpTransportBase):
    """Legacy HTTP+SSE (2024-11-05): GET an event stream, POST to its `endpoint`.

    Losing the stream loses the server's session (a new stream brings a new
    endpoint that needs a fresh initialize), so a lost stream is final here:
    on_closed fires once and the owner reconnects with its own backoff.
    """

    def __init__(self, name: str, url: str, headers: Mapping[str, str], on_message: OnMessage,
                 on_closed: OnClosed, *, connect_timeout: float = DEFAULT_CONNECT_TIMEOUT, log=logger,
                 auth=None, auth_settings=None):
        super().__init__(name, url, headers, on_message, on_closed,
                         connect_timeout=connect_timeout, log=log, auth=auth, auth_settings=auth_settings)
        self._endpoint: str | None = None
        self._ready = gevent.event.AsyncResult()
        self._opened = False

    def open(self) -> None:
        self._check_open()
        if self._opened:
            raise TransportError(f"{self.name}: open() called twice")
        self._opened = True
        self._greenlets.spawn(self._read_stream)
        try:
            self._endpoint = self._ready.get(timeout=self._connect_timeout)
        except gevent.Timeout:
            self._release()
            raise TransportError(
                f"{self.name}: no endpoint event from {redact_url(self.url)} "
                f"within {self._connect_timeout:g}s") from None
        except TransportError:
            self._release()
            raise
        assert self._endpoint is not None  # _ready is only ever set to a resolved endpoint
        self._log.debug("SSE session open, posting to {}", redact_url(self._endpoint))

    def send(self, message: dict) -> None:
        if self._endpoint is None and not self._closing:
            raise TransportError(f"{self.name}: not open")
        super().send(message)

    def set_protocol_version(self, version: str) -> None:
        # The 2024-11-05 transport has no version header; nothing to do.
        pass

    def _read_stream(self) -> None:
        headers = self._with_bearer({**self._headers, "Accept": SSE_MEDIA_TYPE, "Cache-Control": "no-cache"})
        try:
            # No read timeout: the stream may be silent for as long as the server likes.
            resp = self._http.get(self.url, headers=headers, stream=True,
                                  timeout=(self._connect_timeout, None))
        except requests.RequestException as exc:
            self._ready.set_exception(TransportError(
                f"{self.name}: cannot reach {redact_url(self.url)}: {describe_exc(exc)}"))
            return
        with self._tracked(resp):
            needs_auth = self.unauthorized_reason(resp)
            if needs_auth is not None:
                self._ready.set_exception(TransportError(needs_auth))  # open() fails with it: needs-auth
                return
            if resp.status_code != 200 or media_type(resp) != SSE_MEDIA_TYPE:
                self._ready.set_exception(TransportError(
                    f"{self.name}: GET {redact_url(self.url)}: {error_detail(resp)} "
                    f"({media_type(resp) or 'no content type'})"))
                return
            reason = self._pump(resp)
        if self._ready.successful():
            self._report_closed(f"sse stream lost ({reason})")
        elif not self._ready.ready():
            self._ready.set_exception(TransportError(f"{self.name}: stream {reason} before the endpoint event"))

    def _pump(self, resp: requests.Response) -> str:
        try:
            for event in sse_events(resp):
                if event.event == "endpoint":
                    if self._ready.ready():
                        self._log.warning("ignoring a second endpoint event")
                    else:
                        self._ready.set(self._resolve_endpoint(event.data))
                elif event.event == "message" and event.data:
                    for message in parse_payload(event.data):
                        self._deliver(message)
                else:
                    self._log.debug("ignoring SSE event {!r}", event.event)
        except TransportError as exc:
            self._ready.set_exception(exc)
            return "rejected"
        except Exception as exc:  # urllib3 ProtocolError and friends when the link breaks
            return f"broken: {describe_exc(exc)}"
        return "ended by the server"

    def _resolve_endpoint(self, data: str) -> str:
        endpoint = urljoin(self.url, data.strip())
        # Posting our messages (and headers) to another origin would hand them to
        # whoever controls the stream's content: refuse.
        if origin(endpoint) != origin(self.url):
            raise TransportError(
                f"{self.name}: endpoint on another origin rejected: {redact_url(endpoint)}")
        return endpoint

    def _dispatch(self, message: dict) -> None:
        try:
            self._post_message(message)
        finally:
            self._sent(message)

    def _post_message(self, message: dict) -> None:
        assert self._endpoint is not None  # send() queues nothing before open() set it
        headers = self._with_bearer({**self._headers, "Content-Type": JSON_MEDIA_TYPE}, message)
        try:
            resp = self._http.post(self._endpoint, data=jsonrpc.encode(message), headers=headers,
                                   stream=True, timeout=(self._connect_timeout, POST_READ_TIMEOUT))
        except requests.RequestException as exc:
            self._fail(message, f"POST {redact_url(self._endpoint)} failed: {describe_exc(exc)}")
            return
        with self._tracked(resp):
            if self._needs_auth(resp, message):
                return  # the owner fails what is pending when the link ends (a client's 401: answered)
            if resp.status_code >= 300:
                self._fail(message, error_detail(resp), resp.status_code)
            else:
                _ = resp.content  # read the short "Accepted" body so the connection is reused
