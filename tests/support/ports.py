"""Peers on loopback ports without races: port 0 and an announcement, or a bounded retry.

A port picked by the test and bound later by a child can be taken in between by any
other process on the machine. A child that can bind port 0 announces the port it got
("... serving http://HOST:PORT/..." on stderr, as troupe does). A peer that cannot
(server-everything reads a fixed PORT from its environment) is started again on
another port when its bind fails, and counts as up only once it owns the listening
socket itself, so a stranger listening on that port is never mistaken for it.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from tests.support import ROOT, free_port

START_TIMEOUT = 30.0  # how long a peer may take to listen
START_ATTEMPTS = 3  # binds tried by start_with_port_retry before it gives up
STOP_TIMEOUT = 5.0
POLL = 0.05
SERVING = re.compile(r"serving https?://[^\s/]+:(\d+)")
TCP_LISTEN = "0A"  # the st column of /proc/net/tcp{,6} for a listening socket


def announced_port(text: str | bytes | bytearray) -> int | None:
    """The port of the first "serving http://HOST:PORT" line in text, if there is one."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(errors="replace")
    match = SERVING.search(text)
    return int(match.group(1)) if match else None


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT."""
    if proc.poll() is None:
        proc.terminate()
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT)


def _launch(argv: Sequence[str], log_path: Path, env: dict | None) -> subprocess.Popen:
    with open(log_path, "wb") as log:  # a file, not a pipe: a chatty peer cannot block on it
        return subprocess.Popen(list(argv), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})


def _died(proc: subprocess.Popen, argv: Sequence[str], log_path: Path) -> AssertionError:
    return AssertionError(f"{argv[0]} exited with {proc.returncode}:\n{log_path.read_text(errors='replace')[-2000:]}")


def start_announced(argv: Sequence[str], log_path: Path, env: dict | None = None,
                    timeout: float = START_TIMEOUT) -> tuple[subprocess.Popen, int]:
    """Start a peer told to bind port 0; returns it and the port it announced, once that port accepts."""
    proc = _launch(argv, log_path, env)
    try:
        deadline = time.monotonic() + timeout
        while (port := announced_port(log_path.read_bytes())) is None:
            if proc.poll() is not None:
                raise _died(proc, argv, log_path)
            if time.monotonic() > deadline:
                raise AssertionError(f"{argv[0]} announced no port within {timeout}s:\n"
                                     f"{log_path.read_text(errors='replace')[-2000:]}")
            time.sleep(POLL)
        # The socket is ours from the announcement on; wait until it accepts, too.
        while not _accepts(port):
            if proc.poll() is not None:
                raise _died(proc, argv, log_path)
            if time.monotonic() > deadline:
                raise AssertionError(f"{argv[0]} announced port {port} but does not accept there")
            time.sleep(POLL)
        return proc, port
    except BaseException:
        stop(proc)
        raise


def start_with_port_retry(launch: Callable[[int], tuple[Sequence[str], dict | None]], log_path: Path,
                          attempts: int = START_ATTEMPTS,
                          timeout: float = START_TIMEOUT) -> tuple[subprocess.Popen, int]:
    """Start a peer that takes a fixed port: launch(port) -> (argv, extra env).

    The peer is up once it owns a listening socket on the port; if it exits first (the
    port was taken between the pick and its bind), it is started again on another port.
    """
    failures = []
    for _ in range(attempts):
        port = free_port()
        argv, env = launch(port)
        proc = _launch(argv, log_path, env)
        try:
            deadline = time.monotonic() + timeout
            while not _listens(proc.pid, port):
                if proc.poll() is not None:
                    failures.append(str(_died(proc, argv, log_path)))
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"{argv[0]} not listening on {port} within {timeout}s:\n"
                                         f"{log_path.read_text(errors='replace')[-2000:]}")
                time.sleep(POLL)
            else:
                return proc, port
        except BaseException:
            stop(proc)
            raise
    raise AssertionError(f"no bind in {attempts} attempts:\n" + "\n".join(failures))


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A loopback port where connections are refused for as long as the block lasts.

    The socket is bound but never listens: connecting gets ECONNREFUSED, and no other
    process can bind the port meanwhile (no SO_REUSEADDR), unlike a port merely closed.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            next(f)
            for row in f:
                cols = row.split()
                if cols[3] == TCP_LISTEN and int(cols[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(cols[9])
    return inodes


def _listens(pid: int, port: int) -> bool:
    """True when process pid itself holds a listening socket on port (Linux /proc)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    fds = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for fd in fds.iterdir():
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    return True
    return False
