"""Serve one MCP client over our own stdin/stdout (nothing but MCP on stdout)."""
from __future__ import annotations

import os

import gevent
from gevent.fileobject import FileObjectPosix
from loguru import logger

from actors.messages import ClientGone, ClientMessage
from actors.protocol import inbound, jsonrpc, modern
from actors.downstream.session import Session
from actors.transports.pipe_writer import PipeWriter

MAX_LINE = 16 * 1024 * 1024
FIRST_MESSAGE_WAIT = 2.0  # how long upstreams wait to learn the client's capabilities
STDOUT_FLUSH_WAIT = 1.0  # at the end, for the last answers to be taken by the client
PEER = "stdio client"  # who the boundary's log lines name


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
            checked = inbound.parse(line, PEER)  # bad JSON, too deep or of the wrong shape: answered here
            to = inbound.deliver(checked, sink)
            if to is not None:
                session.tell(ClientMessage(checked.message, to))
    finally:
        logger.info("stdin closed: client gone")
        try:
            session.tell(ClientGone())
        except Exception:
            pass
        out.flush(timeout=STDOUT_FLUSH_WAIT)
        out.close()
        inp.close()
        os.close(out_fd)


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
