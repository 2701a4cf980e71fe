"""Serve one MCP client over our own stdin/stdout (nothing but MCP on stdout)."""
from __future__ import annotations

import os

import gevent
from gevent.fileobject import FileObjectPosix
from loguru import logger

from actors.messages import ClientGone, ClientMessage
from actors.protocol import inbound, jsonrpc
from actors.downstream.session import Session
from actors.tells import tell
from actors.serve.stream_buffer import StreamStats, WriterGate, droppable
from actors.transports.pipe_writer import PipeWriter

MAX_LINE = 16 * 1024 * 1024
STDOUT_FLUSH_WAIT = 1.0  # at the end, for the last answers to be taken by the client
PEER = "stdio client"  # who the boundary's log lines name


def serve(runtime, stdin_fd: int = 0, stdout_fd: int = 1) -> None:
    """Run until stdin reaches EOF (the client went away) or the greenlet is killed."""
    out_fd = os.dup(stdout_fd)
    # The answers of one turn of the hub go out in one write, without a writer greenlet's wake-up.
    out = PipeWriter(out_fd, lambda exc: logger.warning("stdout closed: {}", exc))
    reader = gevent.getcurrent()
    stats = StreamStats()

    def too_slow() -> None:  # a Session's greenlet: the reader greenlet is ended from one of its own
        logger.error("stdio: the client stopped reading its answers ({} bytes unsent, "
                     "serve.stream_buffer_bytes {}); ending it", out.queued, gate.limit)
        gevent.spawn(gevent.kill, reader)
    gate = WriterGate(runtime.config.serve.stream_buffer_bytes, too_slow, stats)

    def sink(message: dict) -> None:  # any greenlet; never blocks
        data = jsonrpc.encode(message) + b"\n"
        if gate.admit(out.queued, len(data), droppable(message)):
            out.write(data)

    inp = FileObjectPosix(os.dup(stdin_fd), "rb")
    # Upstreams start at once: what they are told troupe can relay is the same whoever the client
    # is (Runtime.client_caps), so nothing waits for this client's capabilities.
    runtime.start()  # a no-op when main started it
    client = StdioClient(runtime, sink)
    gone = False  # stdin reached EOF: the client left (else troupe was stopped, or ended a slow reader)
    try:
        while True:
            line = inp.readline(MAX_LINE + 1)
            if not line:
                gone = True
                break
            if len(line) > MAX_LINE:
                sink(jsonrpc.error(None, jsonrpc.INVALID_REQUEST, f"message over {MAX_LINE} bytes refused"))
                while line and not line.endswith(b"\n"):
                    line = inp.readline(1 << 20)
                continue
            line = line.strip()
            if not line:
                continue
            # bad JSON, too deep, of the wrong shape or too big a batch: answered here
            checked = inbound.parse(line, PEER, runtime.config.serve.max_batch)
            to = inbound.deliver(checked, client.sink)
            if to is not None:
                client.send(checked.message, to)
    finally:
        if gone:  # a client's normal departure, even in the middle of start-up: news, not trouble
            logger.info("stdin closed: client gone")
        dropped = stats.of("stdio")  # the gate made the front's figures at start: zeros if it dropped nothing
        if dropped["progress"] or dropped["log"]:
            logger.warning("stdio: {} progress and {} log notifications ({} bytes) were dropped for a client "
                           "that fell behind", dropped["progress"], dropped["log"], dropped["bytes"])
        client.close()
        out.flush(timeout=STDOUT_FLUSH_WAIT)
        out.close()
        inp.close()
        os.close(out_fd)


class StdioClient:
    """The stdio client's one Session, and a fresh one if it fails: the front then answers every
    request the failed Session still held (those queued in its mailbox die with it), logs the
    failure and replays the client's handshake (initialize, initialized, its log level) into the
    new Session, so that it serves on with the same negotiated capabilities. troupe never exits
    because a Session failed.

    Used from the stdin reader's greenlet, and from a greenlet of its own when a Session reports
    its failure (`on_failed`); `generation` tells a stale report from the current one.
    """

    REPLAYED = ("initialize", "notifications/initialized", "logging/setLevel")

    def __init__(self, runtime, sink) -> None:
        self.rt, self._client_sink = runtime, sink
        self.open: set = set()  # ids of the client's requests not answered yet
        self.handshake: dict[str, dict] = {}  # method → the client's last message of it (REPLAYED)
        self.generation = 0
        self.session = self._start()

    def _start(self):
        generation = self.generation

        def failed(why: str) -> None:  # the failed Session's greenlet: hand over, never block it
            gevent.spawn(self._replace, generation, why)
        return Session.start(self.rt, notify=self.sink, key="stdio", on_failed=failed)

    def sink(self, message) -> None:
        """What the Session sends the client: an answer closes its request (any greenlet)."""
        for item in message if isinstance(message, list) else (message,):
            if isinstance(item, dict) and "method" not in item:
                self.open.discard(item.get("id"))
        self._client_sink(message)

    def send(self, message, sink=None) -> None:
        """Hand one checked client message to the Session; `sink` (default: this client's own)
        is where its answers go (a batch's may merge troupe's own answers into the array)."""
        sink = sink or self.sink
        ids = []
        for item in message if isinstance(message, list) else (message,):
            if isinstance(item, dict) and isinstance(item.get("method"), str):
                if item["method"] in self.REPLAYED:
                    self.handshake[item["method"]] = item
                rid = item.get("id")
                if isinstance(rid, (str, int)) and not isinstance(rid, bool):
                    ids.append(rid)
        if not tell(self.session, ClientMessage(message, sink)):
            # the Session stopped before this message reached it: the others it held are answered,
            # and this one goes to the fresh Session (never both)
            self._replace(self.generation, "its session had stopped")
            tell(self.session, ClientMessage(message, sink))
        self.open.update(ids)  # no yield since the tell: its answer cannot have come yet

    def _replace(self, generation: int, why: str) -> None:
        if generation != self.generation:
            return  # replaced already
        self.generation += 1
        logger.error("stdio: {}; every open request answered, serving on with a fresh session", why)
        for rid in list(self.open):
            self.sink(jsonrpc.error(rid, jsonrpc.INTERNAL_ERROR, f"{why}: send the request again"))
        self.session = self._start()
        for message in self.handshake.values():
            tell(self.session, ClientMessage(message, _ignore))  # negotiated again; the client heard it once

    def close(self) -> None:
        tell(self.session, ClientGone())


def _ignore(message) -> None:
    pass
