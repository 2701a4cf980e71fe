"""child_process: a stdio server's process, launched by CPython's C spawner, never a fork in Python.

gevent's subprocess.Popen forks troupe in Python and runs Python in the child until exec (gevent's
fork hooks, the hub reinitialised): ~13 ms a launch here, ~30 ms with 30 MiB of heap. This module
calls what the standard library's own Popen calls, `_posixsubprocess.fork_exec`: it vforks and
runs only C in the child (the dup2s, close_fds, the chdir of a `work_dir`, setsid, SIGPIPE and
SIGXFSZ back to their defaults, the exec), and reports a failed exec through a close-on-exec pipe
as subprocess raises it. No address space is copied (a fork without vfork made troupe take ~2 ms
of copy-on-write faults per server while the children had not yet exec'd), and the chdir needs no
shell in front of the server. gevent watches the child as it does its own (gevent.os.fork_and_watch):
libev's SIGCHLD handling reaps it, and waiting for it is cooperative.

fork_exec is CPython's private entry to subprocess, called here with the arguments of CPython
3.11 to 3.13 (FORK_EXEC). On other versions (3.10, 3.14) the launch is os.posix_spawn's, which
cannot change the child's directory: a server with a `work_dir` then starts as
`/bin/sh -c 'cd DIR && exec COMMAND ARGS'`: the shell changes directory and becomes the server
(same pid, same session; its argv[0] is the command's full path); its arguments pass as "$@",
never parsed by the shell. On either path the command is looked up here first, on the child's
PATH as subprocess would, so a missing one fails at launch with subprocess's own error; a file
exec cannot run (no #!, not ELF) is refused, never run by a shell as a script. As with
subprocess's close_fds, the server inherits its three pipes and nothing else. The pipes are raw
file descriptors: the transport reads and writes them without buffered file objects (tracemalloc:
three of gevent's file objects take ~36 KiB a server, three Pipes 0.4 KiB).
"""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess
import sys
from typing import Any

import gevent
import gevent.event
from gevent import monkey
from gevent.os import fork_and_watch
from gevent.socket import wait_read

try:  # CPython's C half of subprocess, on every POSIX system; called with the arguments of 3.11-3.13
    from _posixsubprocess import fork_exec as _fork_exec_in_c
except ImportError:  # another interpreter: posix_spawn (FORK_EXEC False, as the tests also run)
    _fork_exec_in_c = None
_FORK_EXEC: Any = _fork_exec_in_c  # its stub follows the newest CPython; it is called as the running one takes

_close_now = monkey.get_original("os", "close")  # for descriptors no watcher ever had

SHELL = "/bin/sh"
# $0 is the directory, "$@" the command and its arguments; the shell's own PWD and OLDPWD go, so
# the server sees only the environment troupe gives it.
CD_THEN_EXEC = 'cd -- "$0" && unset OLDPWD PWD && exec "$@"'
OUTCOME_MAX_BYTES = 50_000  # what subprocess reads of a failed exec's report
RESET_SIGNALS = tuple(s for s in (getattr(signal, "SIGPIPE", None), getattr(signal, "SIGXFSZ", None)) if s)


class Pipe:
    """One end of a child's pipe: a raw descriptor, closed once."""

    def __init__(self, fd: int) -> None:
        self.fd: int | None = fd

    def fileno(self) -> int:
        if self.fd is None:
            raise ValueError("I/O operation on closed pipe")
        return self.fd

    @property
    def closed(self) -> bool:
        return self.fd is None

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)
            if os.close is not _close_now:
                _turn_the_loop()

    def __del__(self) -> None:  # a process dropped unclosed must not leak its descriptors
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                _close_now(fd)  # no watcher can hold a dropped pipe; and no hub from a finalizer
            except Exception:  # noqa: BLE001 - at interpreter exit os itself may be gone
                pass


def _turn_the_loop() -> None:
    """gevent's os.close (patched) closes a pipe in the loop's check phase, which comes after the
    loop's next poll: with nothing else due, a server saw its stdin's EOF only once some timer
    fired (its stop's grace, 0.5 s, with SIGTERM right after). A zero timer ends that poll at once."""
    timer = gevent.get_hub().loop.timer(0.0)
    timer.start(timer.close)


class ChildProcess:
    """A launched server: its pid and session, the parent's ends of its three pipes, and its exit
    code once gevent's child watcher has reaped it (as subprocess.Popen reports it: -N for signal N)."""

    def __init__(self, pid: int, stdin: Pipe, stdout: Pipe, stderr: Pipe) -> None:
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self._exited = gevent.event.Event()

    def _reaped(self, watcher) -> None:  # libev's callback, in the loop: set, never block
        self.returncode = os.waitstatus_to_exitcode(watcher.rstatus)
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the process itself (not its group), unless it has been reaped: its pid may be reused."""
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code; raises subprocess.TimeoutExpired after `timeout` seconds, as Popen does."""
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
        assert self.returncode is not None  # set before the event
        return self.returncode


def spawn(argv: list[str], env: dict[str, str], cwd: str | None = None) -> ChildProcess:
    """Launch argv in a session of its own, stdin/stdout/stderr on pipes, with exactly `env`.
    Raises OSError (FileNotFoundError, PermissionError, ...) as subprocess.Popen would."""
    if cwd is not None and not os.path.isdir(cwd):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), cwd)
    if cwd is not None and not os.access(cwd, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), cwd)
    executable = _resolve(argv[0], env, cwd)
    ours: list[int] = []
    theirs: list[int] = []
    try:
        for _ in range(3):
            r, w = _pipe()
            ours.append(w if not theirs else r)
            theirs.append(r if not theirs else w)
        child = (_forked if FORK_EXEC else _spawned)(executable, argv, env, cwd, ours, theirs)
        ours = []  # the ChildProcess's own now
        return child
    finally:
        for fd in theirs + ours:
            os.close(fd)


# fork_exec takes 23 arguments, allow_vfork last, in CPython 3.11 to 3.13 (3.10 has neither
# pgid_to_set nor allow_vfork, 3.14 no allow_vfork); elsewhere posix_spawn. Tests run both.
FORK_EXEC = _FORK_EXEC is not None and (3, 11) <= sys.version_info[:2] <= (3, 13)


def _forked(executable: str, argv: list[str], env: dict[str, str], cwd: str | None, ours: list[int],
            theirs: list[int]) -> ChildProcess:
    """fork_exec, then the exec's outcome read off its pipe."""
    env_list = []
    for key, value in env.items():
        name = os.fsencode(key)
        if b"=" in name:
            raise ValueError("illegal environment variable name")
        env_list.append(name + b"=" + os.fsencode(value))
    executables = (os.fsencode(executable),)
    outcome_r, outcome_w = _pipe()
    outcome_w_open = True
    try:
        def launch() -> int:
            # close_fds keeps only the outcome pipe; restore_signals puts SIGPIPE and SIGXFSZ back to
            # default; setsid; vfork allowed (it is used unless the platform lacks it: then a fork).
            return _FORK_EXEC(
                list(argv), executables, True, (outcome_w,), cwd, env_list,
                theirs[0], ours[0], ours[1], theirs[1], ours[2], theirs[2], outcome_r, outcome_w,
                True, True, -1, None, None, None, -1, None, True)

        child = _watched(launch)
        # Closed now, not at the hub's next turn as gevent's os.close would (for a descriptor a
        # watcher might hold): this greenlet waits for the EOF of the very pipe, in that turn.
        _close_now(outcome_w)
        outcome_w_open = False
        for fd in theirs:  # the child has its own copies
            _close_now(fd)
        theirs.clear()
        fd, outcome_r = outcome_r, -1  # _exec_outcome closes it, whatever happens
        failure = _exec_outcome(fd, argv[0], cwd)
        if failure is not None:  # the child exits 255; libev reaps it, and the caller closes our ends
            raise failure
        proc = ChildProcess(child.pid, Pipe(ours[0]), Pipe(ours[1]), Pipe(ours[2]))
        child.adopt(proc)
        return proc
    finally:
        if outcome_w_open:
            _close_now(outcome_w)
        if outcome_r >= 0:
            os.close(outcome_r)


def _spawned(executable: str, argv: list[str], env: dict[str, str], cwd: str | None, ours: list[int],
             theirs: list[int]) -> ChildProcess:
    """posix_spawn (the caller waits until the child has exec'd), through /bin/sh for a work_dir."""
    if cwd is not None:
        _check_format(executable if os.path.isabs(executable) else os.path.join(cwd, executable), argv[0])
        program, args = SHELL, [SHELL, "-c", CD_THEN_EXEC, cwd, executable, *argv[1:]]
    else:
        program, args = executable, list(argv)
    actions: list[tuple] = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(theirs)]
    closefrom = getattr(os, "POSIX_SPAWN_CLOSEFROM", None)  # Python 3.13+
    if closefrom is not None:
        actions.append((closefrom, 3))
    else:
        _inherit_nothing(keep=theirs)
    raw_spawn = monkey.get_original("os", "posix_spawn")  # fork_and_watch watches it, not gevent's wrapper
    child = _watched(lambda: raw_spawn(program, args, env, file_actions=actions, setsid=True,
                                       setsigdef=RESET_SIGNALS, setsigmask=()))
    proc = ChildProcess(child.pid, Pipe(ours[0]), Pipe(ours[1]), Pipe(ours[2]))
    child.adopt(proc)
    return proc


class _Launched:
    """A pid gevent watches, and the ChildProcess its exit is reported to once there is one."""

    def __init__(self) -> None:
        self.pid = 0
        self.proc: ChildProcess | None = None
        self._status = None  # a watcher that fired before adopt()

    def adopt(self, proc: ChildProcess) -> None:
        self.proc = proc
        if self._status is not None:
            proc._reaped(self._status)

    def on_exit(self, watcher) -> None:
        if self.proc is not None:
            self.proc._reaped(watcher)
        else:
            self._status = watcher


def _watched(launch) -> _Launched:
    """Run `launch` (returns a pid) under gevent's child watching."""
    launched = _Launched()
    # Before the launch, as gevent's own Popen does: a child that exits at once must find
    # libev's SIGCHLD handler in place, or its exit goes unseen until some other child's.
    gevent.get_hub().loop.install_sigchld()
    launched.pid = fork_and_watch(launched.on_exit, None, True, launch)
    return launched


def _exec_outcome(fd: int, command: str, cwd: str | None) -> OSError | None:
    """What the child wrote on the close-on-exec pipe before exec (nothing: exec succeeded), as
    subprocess raises it; closes `fd`. Waits cooperatively: only this greenlet waits for the exec."""
    data = b""
    try:
        os.set_blocking(fd, False)
        while len(data) <= OUTCOME_MAX_BYTES:
            try:
                part = os.read(fd, OUTCOME_MAX_BYTES)
            except BlockingIOError:
                wait_read(fd)
                continue
            if not part:
                break
            data += part
    finally:
        os.close(fd)
    if not data:
        return None
    name, _, rest = data.partition(b":")
    code, _, where = rest.partition(b":")
    try:
        number = int(code, 16)
    except ValueError:
        number = 0
    if name != b"OSError" or not number:
        return OSError(errno.EIO, f"the launch failed before exec: {data[:200]!r}")
    if where == b"noexec:chdir":
        return OSError(number, os.strerror(number), cwd)
    if where == b"noexec":
        return OSError(number, os.strerror(number))
    return OSError(number, os.strerror(number), command)


def _inherit_nothing(keep: list[int]) -> None:
    """subprocess's close_fds=True, in the parent: every descriptor above 2 close-on-exec, so a server
    gets its three pipes and nothing else of troupe's (a client's socket, a pipe a library opened
    inheritable). Python opens every descriptor so already; this catches the rest."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        try:
            names = os.listdir("/dev/fd")
        except OSError:
            return
    for name in names:
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                if os.get_inheritable(fd):
                    os.set_inheritable(fd, False)
            except OSError:
                pass  # the directory's own descriptor, closed by now


def _check_format(path: str, command: str) -> None:
    """What exec runs directly: a script with #! or an ELF binary. The shell a work_dir goes
    through would run any other file as a shell script; subprocess refuses it, and so does this."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command) from exc
    if not (head.startswith(b"#!") or head == b"\x7fELF"):
        raise OSError(errno.ENOEXEC, os.strerror(errno.ENOEXEC), command)


def _pipe() -> tuple[int, int]:
    """A close-on-exec pipe whose ends are not 0, 1 or 2 (troupe's own may be closed): dup2 onto a
    descriptor that is already the target would leave it close-on-exec, and the child without it."""
    ends = []
    for fd in os.pipe():
        if fd < 3:
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
            os.close(fd)
            fd = moved
        ends.append(fd)
    return ends[0], ends[1]


def _resolve(command: str, env: dict[str, str], cwd: str | None) -> str:
    """The file the child will run: a command with a slash as given (relative to cwd), else the
    first executable on the child's PATH, as subprocess looks it up."""
    if os.sep in command:
        path = command if os.path.isabs(command) or cwd is None else os.path.join(cwd, command)
        _check_executable(path, command)
        return command
    denied = None
    for folder in os.get_exec_path(env):
        if cwd is not None and not os.path.isabs(folder):
            folder = os.path.join(cwd, folder)
        path = os.path.join(folder, command)
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return path
            denied = path
    if denied is not None:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)


def _check_executable(path: str, command: str) -> None:
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), command)
