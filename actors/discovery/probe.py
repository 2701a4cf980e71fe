"""One-shot MCP health probe: open a transport, initialize, tools/list (or ping), close. A server
that refuses initialize as a modern-only (2026-07-28) one is probed with server/discover and a
tools/list in the modern envelope instead: initialize first keeps legacy servers (some exit on
any other first request) probed exactly as before."""
from __future__ import annotations

import itertools
import time
from typing import Any

import gevent.queue
from loguru import logger

from actors.protocol import handshake, jsonrpc, modern_client
from actors.settings.config import ServerConfig
from actors.transports.base import LinkFailure, TransportError, TransportGarbage
from actors.transports.factory import make_transport

# The probe's own name in clientInfo; version, params and the answer's check are handshake.py's.
CLIENT_INFO = {"name": "troupe-health", "version": "1"}
MAX_TOOL_PAGES = 50  # a server paging forever still gets a verdict
CONNECT_TIMEOUT = 5.0  # HTTP connect, capped by the probe's own timeout


class ProbeFailed(Exception):
    """Why the probe said unhealthy, in one line."""


class _Closed:
    """Put in the probe's inbox by the transport's close callback: the link closed, and why."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason


class _Session:
    """Requests and their answers over one transport, with one deadline for everything."""

    def __init__(self, transport, inbox: gevent.queue.Queue, deadline: float):
        self.transport, self.inbox, self.deadline = transport, inbox, deadline
        self._ids = itertools.count(1)

    def call(self, method: str, params: dict | None = None) -> dict:
        """The response message (result or error) to one request."""
        rid = next(self._ids)
        self.transport.send(jsonrpc.request(rid, method, params))
        while True:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise ProbeFailed(f"no answer to {method} in time")
            try:
                msg = self.inbox.get(timeout=remaining)
            except gevent.queue.Empty:
                raise ProbeFailed(f"no answer to {method} in time") from None
            if isinstance(msg, _Closed):
                raise ProbeFailed(f"connection closed during {method}: {msg.reason}")
            if isinstance(msg, TransportGarbage):
                if msg.request_id == rid:
                    raise ProbeFailed(f"bad answer to {method}: {msg.reason}")
                continue
            if isinstance(msg, LinkFailure):  # refused or cut off: no answer is coming
                if msg.request_id == rid:
                    raise ProbeFailed(f"{method} failed: {msg.reason}")
                continue
            if not isinstance(msg, dict):
                continue
            if jsonrpc.is_response(msg) and msg.get("id") == rid:
                return msg
            if jsonrpc.is_request(msg):
                self._answer_server(msg)

    def _answer_server(self, msg: dict) -> None:
        # A server may ask us things mid-handshake; a probe has nothing to offer but ping.
        if msg.get("method") == "ping":
            self.transport.send(jsonrpc.result(msg["id"], {}))
        else:
            self.transport.send(jsonrpc.error(msg["id"], jsonrpc.METHOD_NOT_FOUND, "not supported by probe"))


def _error_text(msg: dict) -> str:
    err = msg.get("error") or {}
    return f"{err.get('message', 'error')} ({err.get('code')})" if isinstance(err, dict) else str(err)


def _modern_only(msg: dict) -> bool:
    """initialize refused with "unsupported version" naming a modern version."""
    err = msg.get("error")
    data = err.get("data") if isinstance(err, dict) else None
    supported = data.get("supported") if isinstance(data, dict) else None
    return (isinstance(err, dict) and err.get("code") == modern_client.UNSUPPORTED_VERSION
            and isinstance(supported, list) and modern_client.MODERN_VERSION in supported)


def _count_tools(session: _Session, modern: bool = False) -> int | None:
    """Tools over every page; None if the server has no tools/list."""
    count, cursor = 0, None
    for _ in range(MAX_TOOL_PAGES):
        params = {"cursor": cursor} if cursor else {}
        msg = session.call("tools/list", modern_client.envelope(params) if modern else params)
        if "error" in msg:
            return None
        result: Any = msg.get("result") or {}
        count += len(result.get("tools") or ())
        cursor = result.get("nextCursor")
        if not cursor:
            break
    return count


def _probe_modern(session: _Session) -> tuple[bool, str, int]:
    """The stateless era's health check: server/discover, then its tools (no ping in that era)."""
    found = session.call(*handshake.discovery({}, CLIENT_INFO))
    if "error" in found:
        return False, f"{modern_client.DISCOVER} failed: {_error_text(found)}", 0
    try:
        opened = handshake.accept_discover(found.get("result"))
    except handshake.HandshakeError as exc:
        return False, str(exc), 0
    session.transport.set_protocol_version(opened.version)
    tools = _count_tools(session, modern=True) if "tools" in opened.capabilities else None
    if tools is not None:
        return True, f"ok: {tools} tools", tools
    return True, f"ok: {modern_client.DISCOVER}", 0


def probe(config: ServerConfig, timeout: float) -> tuple[bool, str, int]:
    """(healthy, one-line detail, tool count). Blocks its greenlet for at most ~timeout plus
    the transport's close; never raises an Exception (a kill still raises GreenletExit)."""
    inbox: gevent.queue.Queue = gevent.queue.Queue()
    try:
        # The Connection's transports, the same way; only the connect wait is the probe's own.
        transport = make_transport(config, inbox.put, lambda reason: inbox.put(_Closed(reason)),
                                   connect_timeout=min(CONNECT_TIMEOUT, timeout))
    except ImportError as exc:
        return False, f"{config.transport} transport not available: {exc}", 0
    session = _Session(transport, inbox, time.monotonic() + timeout)
    try:
        transport.open()
        init = session.call(*handshake.opening({}, CLIENT_INFO))  # a probe offers the server nothing
        if "error" in init and _modern_only(init):
            return _probe_modern(session)
        if "error" in init:
            return False, f"initialize failed: {_error_text(init)}", 0
        try:
            opened = handshake.accept(init.get("result"))
        except handshake.HandshakeError as exc:
            return False, str(exc), 0
        transport.set_protocol_version(opened.version)
        confirm = handshake.confirmation(opened)
        if confirm is not None:
            transport.send(confirm)
        tools = _count_tools(session) if "tools" in opened.capabilities else None
        if tools is not None:
            return True, f"ok: {tools} tools", tools
        ping = session.call("ping")
        if "error" in ping:
            return False, f"ping failed: {_error_text(ping)}", 0
        return True, "ok: ping", 0
    except ProbeFailed as exc:
        return False, str(exc), 0
    except TransportError as exc:
        return False, f"transport error: {exc}", 0
    except Exception as exc:  # a misbehaving server must not crash the checker
        return False, f"probe error: {type(exc).__name__}: {exc}", 0
    finally:
        try:
            transport.close()
        except Exception as exc:
            logger.debug("probe {}: close failed: {}", config.name, exc)
