"""child_process: a stdio server's process, launched by posix_spawn instead of a fork of troupe.

gevent's subprocess.Popen forks troupe itself and runs Python in the child until exec: the kernel
copies the page tables of troupe's whole heap, and the hub waits. That took ~13 ms a launch here
(~30 ms with 30 MiB of heap), most of troupe's own time in a start with 50 servers. posix_spawn
(glibc clones without copying the address space, and execs at once) takes ~1 ms, however big
troupe has grown. gevent watches the child as it does its own (gevent.os.fork_and_watch, given
posix_spawn as its `fork`): libev's SIGCHLD handling reaps it, and waiting for it is cooperative.

posix_spawn cannot change the child's directory, so a server with a `work_dir` starts as
`/bin/sh -c 'cd DIR && exec COMMAND ARGS'`: the shell changes directory and becomes the server
(same pid, same session; its argv[0] is the command's full path); its arguments pass as "$@",
never parsed by the shell. The command is looked up here first, on the child's PATH as
subprocess would, and a file exec cannot run (no #!, not ELF) is refused, so a missing or
unrunnable one still fails at launch with subprocess's own error, never run by the shell as a
script. As with subprocess's close_fds, the server inherits its three pipes and nothing else.
The pipes are raw file descriptors: the transport reads and writes them without buffered file
objects (~16 KiB less per server).
"""
from __future__ import annotations

import errno
import fcntl
import os
import signal
import subprocess

import gevent
import gevent.event
from gevent import monkey
from gevent.os import fork_and_watch

SHELL = "/bin/sh"
# $0 is the directory, "$@" the command and its arguments; the shell's own PWD and OLDPWD go, so
# the server sees only the environment troupe gives it.
CD_THEN_EXEC = 'cd -- "$0" && unset OLDPWD PWD && exec "$@"'
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

    def __del__(self) -> None:  # a process dropped unclosed must not leak its descriptors
        try:
            self.close()
        except Exception:  # noqa: BLE001 - at interpreter exit os itself may be gone
            pass


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
    if cwd is not None:
        _check_format(executable if os.path.isabs(executable) else os.path.join(cwd, executable), argv[0])
        program, args = SHELL, [SHELL, "-c", CD_THEN_EXEC, cwd, executable, *argv[1:]]
    else:
        program, args = executable, list(argv)
    ours: list[int] = []
    theirs: list[int] = []
    try:
        for _ in range(3):
            r, w = _pipe()
            ours.append(w if not theirs else r)
            theirs.append(r if not theirs else w)
        actions: list[tuple] = [(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(theirs)]
        closefrom = getattr(os, "POSIX_SPAWN_CLOSEFROM", None)  # Python 3.13+
        if closefrom is not None:
            actions.append((closefrom, 3))
        else:
            _inherit_nothing(keep=theirs)
        raw_spawn = monkey.get_original("os", "posix_spawn")  # fork_and_watch watches it, not gevent's wrapper
        child: list[ChildProcess] = []

        def on_exit(watcher) -> None:
            if child:
                child[0]._reaped(watcher)

        def launch() -> int:
            return raw_spawn(program, args, env, file_actions=actions, setsid=True,
                             setsigdef=RESET_SIGNALS, setsigmask=())

        # Before the launch, as gevent's own Popen does: a child that exits at once must find
        # libev's SIGCHLD handler in place, or its exit goes unseen until some other child's.
        gevent.get_hub().loop.install_sigchld()
        pid = fork_and_watch(on_exit, None, True, launch)
        child.append(ChildProcess(pid, Pipe(ours[0]), Pipe(ours[1]), Pipe(ours[2])))
        ours = []
        return child[0]
    finally:
        for fd in theirs + ours:
            os.close(fd)


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
