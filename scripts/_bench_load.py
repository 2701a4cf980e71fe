"""Cheap load for scripts/bench.py section 7: N calls kept in flight over one stdio pipe, or over N
keep-alive HTTP connections, from one thread with pre-encoded requests (so the client, on the same
2 cores, takes as little CPU as it can from what it measures)."""
from __future__ import annotations

import selectors
import socket
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

from _bench_modern import cpu_seconds
from _bench_rpc import BenchError, StdioRpc

READ = 256 * 1024


@dataclass
class Window:
    """Calls answered inside the measured window, and the front's CPU time over it."""

    calls: int = 0
    seconds: float = 0.0
    cpu_s: float | None = None

    def figures(self) -> dict:
        out = {"calls_per_s": self.calls / self.seconds if self.seconds else 0.0, "calls": self.calls,
               "seconds": self.seconds}
        if self.cpu_s is not None and self.calls:
            out["cpu_us_per_call"] = self.cpu_s * 1e6 / self.calls
        return out


class _Clock:
    """Warm-up, then a window of `seconds`: counts answers and reads the front's CPU at both edges."""

    def __init__(self, seconds: float, warmup: float, cpu_pid: int | None):
        self.pid, self.window = cpu_pid, Window()
        now = time.perf_counter()
        self.start, self.end = now + warmup, now + warmup + seconds
        self.open = False
        self._cpu0 = 0.0

    def tick(self, answered: int) -> bool:
        """Count answers; False once the window is over."""
        now = time.perf_counter()
        if not self.open and now >= self.start:
            self.open, self.start = True, now
            self._cpu0 = cpu_seconds(self.pid) if self.pid else 0.0
        elif self.open:
            self.window.calls += answered
        if now >= self.end:
            self.window.seconds = now - self.start if self.open else 0.0
            if self.pid and self.open:
                self.window.cpu_s = cpu_seconds(self.pid) - self._cpu0
            return False
        return True


def stdio_call_bytes(tool: str, arguments: dict) -> bytes:
    """One tools/call line (a fixed id: the client only counts answers, every one to a call it sent)."""
    return orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}}) + b"\n"


def stdio_inflight(client: StdioRpc, tool: str, arguments: dict, inflight: int, seconds: float, warmup: float,
                   cpu_pid: int | None = None) -> dict:
    """Keep `inflight` tools/calls outstanding on an initialized stdio client: a new one for each answer."""
    line = stdio_call_bytes(tool, arguments)
    out, inp = client.proc.stdin, client.proc.stdout
    assert out is not None and inp is not None
    clock = _Clock(seconds, warmup, cpu_pid)
    out.write(line * inflight)
    out.flush()
    outstanding, partial = inflight, b""
    while True:
        chunk = inp.read1(READ)
        if not chunk:
            raise BenchError(f"{client.label} closed stdout under load:\n{client.tail()}")
        data = partial + chunk
        cut = data.rfind(b"\n") + 1
        lines, partial = data[:cut], data[cut:]
        answered = lines.count(b'"result"')
        if b'"error"' in lines or b'"isError":true' in lines:
            raise BenchError(f"{client.label}: a call failed under load: {lines[:300]!r}")
        outstanding -= answered
        if not clock.tick(answered):
            break
        out.write(line * answered)
        out.flush()
        outstanding += answered
    _drain(client, outstanding, partial)
    return clock.window.figures()


def _drain(client: StdioRpc, outstanding: int, partial: bytes) -> None:
    """Read the answers still owed, so the next measurement starts from an idle pipe."""
    inp = client.proc.stdout
    assert inp is not None
    data = partial
    deadline = time.monotonic() + 30
    while data.count(b"\n") < outstanding:
        if time.monotonic() > deadline:
            raise BenchError(f"{client.label}: {outstanding} answers not drained in 30 s")
        chunk = inp.read1(READ)
        if not chunk:
            raise BenchError(f"{client.label} closed stdout while draining")
        data += chunk


class _HttpConn:
    """One keep-alive connection replaying one pre-encoded POST; parses Content-Length and chunked answers."""

    def __init__(self, url: str, request: bytes):
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.request, self.buf = request, b""

    def send(self) -> None:
        self.sock.sendall(self.request)  # small enough for an empty socket buffer

    def answers(self) -> int:
        """Read what arrived; how many complete answers it finished (0 or 1: one request in flight)."""
        try:
            chunk = self.sock.recv(READ)
        except BlockingIOError:
            return 0
        if not chunk:
            raise BenchError("the server closed a keep-alive connection under load")
        self.buf += chunk
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return 0
        head = self.buf[:end].lower()
        if not head.startswith(b"http/1.1 200"):
            raise BenchError(f"HTTP answer under load: {self.buf[:300]!r}")
        body = self.buf[end + 4:]
        at = head.find(b"content-length:")
        if at >= 0:
            length = int(head[at + 15:head.find(b"\r\n", at) if head.find(b"\r\n", at) > 0 else None])
            if len(body) < length:
                return 0
            payload, rest = body[:length], body[length:]
        else:
            payload, rest = _dechunk(body)
            if payload is None:
                return 0
        if b'"result"' not in payload or b'"isError":true' in payload:
            raise BenchError(f"a call failed under load: {payload[:300]!r}")
        self.buf = rest
        return 1

    def close(self) -> None:
        self.sock.close()


def _dechunk(body: bytes) -> tuple[bytes | None, bytes]:
    """A complete chunked body and what follows it, or (None, body) while it is incomplete."""
    parts, at = [], 0
    while True:
        eol = body.find(b"\r\n", at)
        if eol < 0:
            return None, body
        size = int(body[at:eol].split(b";")[0], 16)
        if len(body) < eol + 2 + size + 2:
            return None, body
        if size == 0:
            return b"".join(parts), body[eol + 4:]
        parts.append(body[eol + 2:eol + 2 + size])
        at = eol + 2 + size + 2


def http_post_bytes(url: str, message: dict, headers: dict) -> bytes:
    parts = urlsplit(url)
    body = orjson.dumps(message)
    head = "".join(f"{k}: {v}\r\n" for k, v in {"Host": parts.netloc, "Content-Type": "application/json",
                                                 "Accept": "application/json, text/event-stream",
                                                 **headers, "Content-Length": str(len(body))}.items())
    return f"POST {parts.path} HTTP/1.1\r\n{head}\r\n".encode() + body


def http_inflight(url: str, requests: list[bytes], seconds: float, warmup: float, cpu_pid: int | None = None) -> dict:
    """One connection per request in `requests` (each with its own session headers), each replaying its POST
    as soon as the last answer came: len(requests) calls in flight."""
    conns = [_HttpConn(url, r) for r in requests]
    sel = selectors.DefaultSelector()
    try:
        for c in conns:
            sel.register(c.sock, selectors.EVENT_READ, c)
            c.send()
        clock = _Clock(seconds, warmup, cpu_pid)
        going = True
        while going:
            answered = 0
            for key, _ in sel.select(timeout=30):
                conn: _HttpConn = key.data
                if conn.answers():
                    answered += 1
                    conn.send()
            going = clock.tick(answered)
        return clock.window.figures()
    finally:
        sel.close()
        for c in conns:
            c.close()
