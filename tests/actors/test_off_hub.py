"""A private file's fsync and a contended approvals lock wait off the hub: while one greenlet waits
for the disk or for another process's lock, every other greenlet keeps running."""
from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys

import gevent
import gevent.event
from gevent import monkey

from actors import off_hub, private_files
from actors.trust import ledger
from tests.support import wait_until

_os_thread = monkey.get_original("_thread", "get_ident")  # the OS thread's id (gevent's is the greenlet's)
_NativeEvent = monkey.get_original("threading", "Event")  # waits in the worker thread, set from a greenlet


class _Ticker:
    """A greenlet that counts its turns: it stops counting whenever the hub is held."""

    def __init__(self) -> None:
        self.ticks = 0
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            self.ticks += 1
            gevent.sleep(0.005)

    def stop(self) -> None:
        self._greenlet.kill()


def test_a_slow_fsync_holds_only_the_writing_greenlet(tmp_path, monkeypatch):
    """The fsync waits (here until the test lets it go) while this greenlet keeps running: on the hub
    it could not, and the fsync would give up after 5 s with `released` unset."""
    real_fsync = os.fsync
    fsyncing: list[int] = []  # the OS thread it ran in: appended there, read by the test's polls
    released = _NativeEvent()
    outcome: list[bool] = []

    def slow_fsync(fd) -> None:
        fsyncing.append(_os_thread())
        outcome.append(released.wait(5.0))  # a disk that answers when told
        real_fsync(fd)
    monkeypatch.setattr(os, "fsync", slow_fsync)
    target = tmp_path / "private" / "record.json"
    writer = gevent.spawn(private_files.write_private, target, b'{"a": 1}', ".record-")
    wait_until(lambda: fsyncing, 5, message="the fsync began")
    assert not writer.ready()
    released.set()  # from this greenlet, while the fsync still waits
    writer.get(timeout=10)
    assert outcome == [True], "the fsync was not released by the test: the hub was held"
    assert fsyncing != [_os_thread()], "the fsync ran in the hub's own thread"
    assert target.read_bytes() == b'{"a": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["record.json"]  # no temporary file left


def test_an_approvals_file_locked_by_another_process_is_waited_for_off_the_hub(tmp_path):
    path = tmp_path / "approvals.json"
    book = ledger.Ledger(str(path))
    book.update(lambda data: None)  # the file and its lock file exist
    holder = subprocess.Popen(
        # it holds the lock until told, or 10 s at most (a hub held by the wait must not deadlock the test)
        [sys.executable, "-c", "import fcntl, select, sys\n"
         "lock = open(sys.argv[1], 'a'); fcntl.flock(lock, fcntl.LOCK_EX)\n"
         "print('held', flush=True); select.select([sys.stdin], [], [], 10.0)", str(book._lock_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    ticker = _Ticker()
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert holder.stdout.readline().strip() == b"held"
        updating = gevent.spawn(book.update, lambda data: data.setdefault("note", "written"))
        before = ticker.ticks
        # a held hub ticks no more until the holder gives up (10 s), and by then the update is done
        wait_until(lambda: ticker.ticks - before >= 15, 8, message="greenlets ran while the lock was waited for")
        assert not updating.ready(), "the update went ahead while another process held the lock"
        holder.stdin.write(b"\n")
        holder.stdin.flush()
        updating.get(timeout=10)
    finally:
        ticker.stop()
        holder.kill()
        holder.wait(5)
    assert book.read()["note"] == "written"


def test_the_hub_greenlet_itself_runs_the_call_in_place():
    """A libev callback runs in the hub, which cannot wait on itself: there the call runs directly."""
    where = []
    done = gevent.event.Event()

    def callback() -> None:
        where.append(off_hub.blocking(lambda: gevent.getcurrent() is gevent.get_hub()))
        done.set()
    gevent.get_hub().loop.run_callback(callback)
    wait_until(done.is_set, 5, message="the callback ran")
    assert where == [True]


def test_a_lock_free_update_takes_the_lock_at_once(tmp_path, monkeypatch):
    """Uncontended, the lock is taken without a worker thread (a start with nobody else writing)."""
    handed_off = []
    monkeypatch.setattr(ledger, "blocking", lambda call, *args: handed_off.append(call) or call(*args))
    ledger.Ledger(str(tmp_path / "approvals.json")).update(lambda data: None)
    assert fcntl.flock not in handed_off
