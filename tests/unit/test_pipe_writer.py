"""PipeWriter: one write per hub turn, in order, a full pipe drained later, a broken or stalled reader reported."""
from __future__ import annotations

import os

import time

import gevent
import pytest

from actors.transports.pipe_writer import PipeWriter as _PipeWriter

_writers: list = []


def PipeWriter(*args, **kwargs):  # noqa: N802  (the class, remembered so teardown stops its drain)
    writer = _PipeWriter(*args, **kwargs)
    _writers.append(writer)
    return writer


def wait_until(condition, timeout: float) -> None:
    """Bounded poll that lets the hub run (these tests run unpatched: time.sleep would stall it)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        gevent.sleep(0.01)


@pytest.fixture
def pipe():
    r, w = os.pipe()
    yield r, w
    while _writers:
        _writers.pop().close()
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def _read_all(fd: int, want: int) -> bytes:
    os.set_blocking(fd, False)
    got = b""
    while len(got) < want:
        try:
            got += os.read(fd, 1 << 20)
        except BlockingIOError:
            gevent.sleep(0.001)
    return got


def test_messages_of_one_turn_go_out_in_one_write_in_order(pipe, monkeypatch):
    r, w = pipe
    writes = []
    real = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: writes.append(bytes(data)) or real(fd, data))
    out = PipeWriter(w, lambda exc: None)
    for n in range(5):
        out.write(b"%d\n" % n)
    assert writes == []  # nothing until the writing greenlet yields
    gevent.sleep(0)
    assert writes == [b"0\n1\n2\n3\n4\n"]
    assert out.queued == 0
    assert _read_all(r, 10) == b"0\n1\n2\n3\n4\n"


def test_a_full_pipe_is_drained_when_the_reader_reads_and_order_holds(pipe):
    r, w = pipe
    out = PipeWriter(w, lambda exc: None)
    big = b"x" * (256 * 1024) + b"\n"  # four times what a pipe holds
    out.write(big)
    gevent.sleep(0)
    assert out.queued > 0  # the pipe took what it could; the rest waits for the reader
    out.write(b"after\n")
    got = _read_all(r, len(big) + 6)
    assert got == big + b"after\n"
    wait_until(lambda: out.queued == 0, timeout=5)


def test_a_reader_that_stops_reading_is_reported_as_a_stall(pipe):
    _, w = pipe
    reported = []
    out = PipeWriter(w, reported.append, stall_timeout=0.2)
    out.write(b"y" * (256 * 1024))
    wait_until(lambda: reported == [None], timeout=5)
    assert out.closed and out.queued == 0
    out.write(b"ignored\n")  # nothing more is written once broken


def test_a_closed_reader_is_reported_with_the_error(pipe):
    r, w = pipe
    os.close(r)
    reported = []
    out = PipeWriter(w, reported.append)
    out.write(b"z\n")
    wait_until(lambda: len(reported) == 1, timeout=5)
    assert isinstance(reported[0], BrokenPipeError)


def test_flush_waits_for_what_was_written(pipe):
    r, w = pipe
    out = PipeWriter(w, lambda exc: None)
    reader = gevent.spawn(_read_all, r, 200 * 1024)
    out.write(b"q" * (200 * 1024))
    out.flush(timeout=5)
    assert out.queued == 0
    assert len(reader.get(timeout=5)) == 200 * 1024
