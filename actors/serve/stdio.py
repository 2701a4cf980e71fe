"""Serve one MCP client over our own stdin/stdout (nothing but MCP on stdout)."""
from __future__ import annotations

import os

import gevent
from gevent.fileobject import FileObjectPosix
from loguru import logger

from actors.messages import ClientGone, ClientMessage
from actors.protocol import jsonrpc, modern
from actors.downstream.session import Session
from actors.tells import tell
from actors.transports.pipe_writer import PipeWriter

MAX_LINE = 16 * 1024 * 1024
FIRST_MESSAGE_WAIT = 2.0  # how long upstreams wait to learn the client's capabilities
STDOUT_FLUSH_WAIT = 1.0  # at the end, for the last answers to be taken by the client
SESSION_GONE = "troupe internal error: the session serving this client has stopped"


def serve(runtime, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Run until stdin reaches EOF (the client went away) or the greenlet is killed."""
    out_fd = os.dup(stdout_fd)
    # The answers of one turn of the hub go out in one write, without a writer greenlet's wake-up.
    out = PipeWriter(out_fd, lambda exc: logger.warning("stdout closed: {}", exc))

    def sink(message: dict) -> None:  # any greenlet; never blocks
        out.write(jsonrpc.encode(message) + b"\n")

    inp = FileObjectPosix(os.dup(stdin_fd), "rb")
    # A stdio client sends initialize (or, modern, a request with its capabilities in _meta) as
    # soon as it has spawned us: those capabilities tell what troupe may advertise to legacy
    # upstreams (sampling, elicitation, roots), so the upstream connections start once it is
    # read (or after a short wait for a silent client).
    first = None
    with gevent.Timeout(FIRST_MESSAGE_WAIT, False):  # pyright: ignore[reportArgumentType]  # stubs lack documented False
        first = inp.readline(MAX_LINE + 1)
    runtime.set_upstream_capabilities(_capabilities_of(first))
    runtime.start()
    session = Session.start(runtime, notify=sink, key="stdio")
    pending = [first] if first is not None else []
    gone_logged = False
    try:
        while True:
            line = pending.pop() if pending else inp.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line) > MAX_LINE:
                sink(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, f"message over {MAX_LINE} bytes refused"))
                while line and not line.endswith(b"\n"):
                    line = inp.readline(1 << 20)
                continue
            line = line.strip()
            if not line:
                continue
            try:
                message = jsonrpc.decode(line)
            except ValueError as exc:
                sink(jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"parse error: {exc}"))
                continue
            if not tell(session, ClientMessage(message, sink)):
                if not gone_logged:
                    logger.error("stdio: the client's Session has stopped; its requests are answered with an error")
                    gone_logged = True
                _refuse(message, sink)
    finally:
        logger.info("stdin closed: client gone")
        tell(session, ClientGone())  # False: it stopped before the client left
        out.flush(timeout=STDOUT_FLUSH_WAIT)
        out.close()
        inp.close()
        os.close(out_fd)


def _refuse(message, sink) -> None:
    """One answer for each request the stopped Session cannot take, so the client never waits on
    it (a reader that raised instead would end troupe); notifications have nobody to reach."""
    for one in message if isinstance(message, list) else (message,):
        if isinstance(one, dict) and "id" in one and isinstance(one.get("method"), str):
            sink(jsonrpc.error(one["id"], jsonrpc.INTERNAL_ERROR, SESSION_GONE))


def _capabilities_of(line: bytes | None) -> dict:
    try:
        msg = jsonrpc.decode(line) if line else None
    except ValueError:
        return {}
    if not isinstance(msg, dict) or not isinstance(msg.get("params"), dict):
        return {}
    params = msg["params"]
    if msg.get("method") == "initialize":
        caps = params.get("capabilities")
    elif modern.is_modern(params):  # a modern client (its server/discover probe, say) declares them per request
        caps = params["_meta"].get(modern.META_CAPABILITIES)
    else:
        caps = None
    return caps if isinstance(caps, dict) else {}
