"""The audit trail on disk: appending lines to an owner-only file, rotated by size (file → file.1 …
file.keep), and reading the live and rotated files back, oldest first."""
from __future__ import annotations

import os
import re
from typing import Iterator

FILE_MODE = 0o600  # owner-only: who called what is for the operator's eyes
DIR_MODE = 0o700  # a directory troupe makes for it, likewise


class AuditFile:
    """Appends to `path`, rotating it once the next append would take it past `max_bytes`, and
    keeping `keep` rotated files. One writer per process uses it (the audit writer's greenlet, or
    a CLI command recording an operator act); another process may append to the same file (each
    append is one O_APPEND write, whole) or rotate it: each append first checks that the file at
    `path` is still the one it holds open, and reopens it if not."""

    def __init__(self, path: str, max_bytes: int, keep: int) -> None:
        self.path, self.max_bytes, self.keep = path, max_bytes, keep
        self._fd: int | None = None
        self._ino: int | None = None
        self.rotations = 0

    def append(self, blob: bytes) -> None:
        """Write `blob` (whole lines) at the end of the live file, rotating it first if it would
        grow past max_bytes (a file holds at least one append, however big)."""
        self.write_lines([blob])

    def write_lines(self, lines: list[bytes]) -> None:
        """Write `lines` (each ending in a newline) in as few writes as the size bound allows: the
        file is rotated before a line that would take it past max_bytes (a line bigger than that
        gets a file of its own)."""
        fd, size = self._current()
        chunk: list[bytes] = []
        pending = 0
        for line in lines:
            if size + pending + len(line) > self.max_bytes and size + pending > 0:
                if chunk:
                    _write_all(fd, b"".join(chunk))
                    chunk, pending = [], 0
                self._rotate()
                fd, size = self._current()
            chunk.append(line)
            pending += len(line)
        if chunk:
            _write_all(fd, b"".join(chunk))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._ino = None

    def _current(self) -> tuple[int, int]:
        """(the live file's fd, its size now), reopened when the path names another file."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            st = None
        if self._fd is not None and st is not None and st.st_ino == self._ino:
            return self._fd, st.st_size
        self.close()
        folder = os.path.dirname(self.path) or "."
        os.makedirs(folder, mode=DIR_MODE, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        os.fchmod(fd, FILE_MODE)  # a file that was there before, made wider by hand, is narrowed again
        st = os.fstat(fd)
        self._fd, self._ino = fd, st.st_ino
        return fd, st.st_size

    def _rotate(self) -> None:
        """file.(keep-1) → file.keep (the oldest dropped), …, file → file.1."""
        for n in range(self.keep - 1, 0, -1):
            older = f"{self.path}.{n}"
            if os.path.exists(older):
                os.replace(older, f"{self.path}.{n + 1}")
        if os.path.exists(self.path):
            os.replace(self.path, f"{self.path}.1")
        self.close()
        self.rotations += 1


def _write_all(fd: int, blob: bytes) -> None:
    view = memoryview(blob)
    while view:
        view = view[os.write(fd, view):]


def files_oldest_first(path: str) -> list[str]:
    """The live file and its rotated ones (file.N, any N) that exist, oldest first."""
    folder, base = os.path.split(path)
    pattern = re.compile(re.escape(base) + r"\.(\d+)$")
    try:
        names = os.listdir(folder or ".")
    except FileNotFoundError:
        return []
    rotated = sorted(((int(m.group(1)), name) for name in names if (m := pattern.match(name))), reverse=True)
    out = [os.path.join(folder, name) for _, name in rotated]
    if os.path.exists(path):
        out.append(path)
    return out


def read_lines(path: str) -> Iterator[bytes]:
    """Every line of the trail, oldest file first; a file rotated away meanwhile is skipped."""
    for name in files_oldest_first(path):
        try:
            with open(name, "rb") as fh:
                for line in fh:
                    line = line.strip()
                    if line:
                        yield line
        except FileNotFoundError:
            continue
