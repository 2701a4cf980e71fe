"""A real Redis for cluster tests: Debian's redis-server on a free loopback port, nothing saved
(`--save '' --appendonly no`), stopped (and restartable on the same port) by the test."""
from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

from tests.support import wait_until
from tests.support.ports import start_with_port_retry, stop

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class RedisServer:
    """One redis-server child; `url` names DB 0. `stop()` and `start()` again keep the port, so
    a test can take Redis away from running troupes and give it back."""

    def __init__(self, workdir: Path) -> None:
        if not Path(REDIS_SERVER).exists():
            raise AssertionError(f"{REDIS_SERVER} is missing: run .ci/run (it installs Debian's redis-server)")
        self.workdir = workdir
        self.port: int | None = None
        self.proc: subprocess.Popen | None = None

    def _argv(self, port: int) -> list[str]:
        return [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", str(self.workdir)]

    def start(self) -> "RedisServer":
        if self.port is None:
            self.proc, self.port = start_with_port_retry(lambda port: (self._argv(port), None),
                                                         self.workdir / "redis.log")
        else:  # the same port again: the troupes were told this URL
            with open(self.workdir / "redis.log", "ab") as log:
                self.proc = subprocess.Popen(self._argv(self.port), stdout=log, stderr=subprocess.STDOUT)
            wait_until(self._answers, 15, message=f"redis-server back on port {self.port}")
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port or 0), timeout=1) as conn:
                conn.sendall(b"PING\r\n")
                return conn.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None
