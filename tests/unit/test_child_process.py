"""A stdio server's process as troupe launches it (actors/transports/child_process.py), by fork_exec
and by the posix_spawn fallback alike: in a session of its own, exactly the environment given, its work_dir, default SIGPIPE, pipes that
carry bytes both ways, exit codes as subprocess reports them, and subprocess's own errors for a
command that cannot run. Each case runs in a fresh patched interpreter: gevent's child watcher
reaps every child of its process, which pytest's own subprocesses must not meet."""
from __future__ import annotations


from typing import Callable

import pytest

from tests.support.fresh import run_fresh

PRELUDE = ("import json, os, signal, sys\n"
           "from actors import patching\n"
           "patching.patch_all()\n"
           "import subprocess\n"
           "from actors.transports import child_process\n"
           "ENV = {'PATH': '/usr/bin:/bin', 'MARK': 'given'}\n"
           "from gevent.socket import wait_read\n"
           "def drain(pipe):  # as the transport reads: never blocking the hub, which closes fds (gevent's os.close)\n"
           "    out, fd = b'', pipe.fileno()\n"
           "    os.set_blocking(fd, False)\n"
           "    while True:\n"
           "        try:\n"
           "            chunk = os.read(fd, 65536)\n"
           "        except BlockingIOError:\n"
           "            wait_read(fd, timeout=10)\n"
           "            continue\n"
           "        if not chunk:\n"
           "            return out.decode()\n"
           "        out += chunk\n")


@pytest.fixture(params=["fork_exec", "posix_spawn"])
def run(request) -> Callable[[str], dict]:
    """Runs a case's body in a fresh interpreter, launching by the one way chosen."""
    forks = request.param == "fork_exec"
    return lambda body: run_fresh(f"{PRELUDE}child_process.FORK_EXEC = {forks}\n{body}"
                                  f"assert child_process.FORK_EXEC == {forks}\n")


def test_this_cpython_launches_by_fork_exec():
    """The fallback must not quietly take over where fork_exec's arguments are the known ones."""
    got = run_fresh(PRELUDE + "import sys\np = child_process.spawn(['true'], ENV); p.wait(timeout=10)\n"
                    "print(json.dumps({'fork_exec': child_process.FORK_EXEC, 'version': list(sys.version_info[:2])}))\n")
    assert got["fork_exec"] is ((3, 11) <= tuple(got["version"]) <= (3, 13))


def test_bytes_go_both_ways_and_the_exit_code_is_reported(run):
    got = run("p = child_process.spawn(['cat'], ENV)\n"
               "os.write(p.stdin.fileno(), b'hello\\n'); p.stdin.close()\n"
               "echoed = drain(p.stdout)\n"
               "code = p.wait(timeout=10)\n"
               "q = child_process.spawn(['sh', '-c', 'echo oops >&2; exit 3'], ENV)\n"
               "err = drain(q.stderr)\n"
               "print(json.dumps({'echoed': echoed, 'code': code, 'err': err, 'code2': q.wait(timeout=10),\n"
               "                  'poll': q.poll()}))\n")
    assert got == {"echoed": "hello\n", "code": 0, "err": "oops\n", "code2": 3, "poll": 3}


def test_a_session_of_its_own_exactly_the_given_environment_and_default_sigpipe(run):
    got = run("p = child_process.spawn(['sh', '-c', 'env; ps -o sid= -p $$; grep SigIgn /proc/$$/status'], ENV)\n"
               "out = drain(p.stdout).split('\\n'); p.wait(timeout=10)\n"
               "env = sorted(l for l in out if '=' in l)\n"
               "ign = int([l for l in out if l.startswith('SigIgn')][0].split()[1], 16)\n"
               "sid = int([l for l in out if l.strip().isdigit()][0])\n"
               "print(json.dumps({'env': env, 'own_session': sid == p.pid, 'sigpipe_ignored': bool(ign & (1 << 12))}))\n")
    assert got["own_session"] and not got["sigpipe_ignored"]  # troupe ignores SIGPIPE; its servers must not
    assert [line for line in got["env"] if not line.startswith(("PWD=", "SHLVL=", "_="))] == ["MARK=given",
                                                                                           "PATH=/usr/bin:/bin"]


def test_work_dir_is_entered_and_the_shell_leaves_no_variables(tmp_path, run):
    got = run(f"p = child_process.spawn(['env'], ENV, {str(tmp_path)!r})\n"
               "env = sorted(drain(p.stdout).split()); code = p.wait(timeout=10)\n"
               f"q = child_process.spawn(['pwd'], ENV, {str(tmp_path)!r})\n"
               "where = drain(q.stdout).strip(); q.wait(timeout=10)\n"
               "print(json.dumps({'env': env, 'code': code, 'where': where, 'pid_kept': True}))\n")
    assert got == {"env": ["MARK=given", "PATH=/usr/bin:/bin"], "code": 0, "where": str(tmp_path), "pid_kept": True}


def test_a_work_dir_server_is_the_process_launched_and_its_arguments_are_never_parsed(tmp_path, run):
    got = run("import time\n"
               f"p = child_process.spawn(['printf', '%s|', '$HOME', 'a b', '; rm -rf x', '\"q\"'], ENV, {str(tmp_path)!r})\n"
               "printed = drain(p.stdout); p.wait(timeout=10)\n"
               f"s = child_process.spawn(['sleep', '30'], ENV, {str(tmp_path)!r})\n"
               "deadline = time.monotonic() + 10\n"
               "while time.monotonic() < deadline:\n"
               "    comm = open(f'/proc/{s.pid}/comm').read().strip()\n"
               "    if comm == 'sleep':\n"
               "        break\n"
               "    time.sleep(0.01)\n"
               "s.kill()\n"
               "print(json.dumps({'printed': printed, 'comm': comm, 'killed': s.wait(timeout=10)}))\n")
    assert got == {"printed": "$HOME|a b|; rm -rf x|\"q\"|", "comm": "sleep", "killed": -9}


def test_wait_times_out_as_subprocess_does_and_a_reaped_pid_is_never_signalled(run):
    got = run("p = child_process.spawn(['sleep', '30'], ENV)\n"
               "try:\n"
               "    p.wait(timeout=0.05); timed_out = False\n"
               "except subprocess.TimeoutExpired:\n"
               "    timed_out = True\n"
               "os.killpg(p.pid, signal.SIGTERM)\n"
               "code = p.wait(timeout=10)\n"
               "p.kill()  # reaped: a no-op, never a signal to a reused pid\n"
               "print(json.dumps({'timed_out': timed_out, 'code': code}))\n")
    assert got == {"timed_out": True, "code": -15}


def test_a_command_that_cannot_run_fails_at_launch_with_subprocess_errors(tmp_path, run):
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\n")
    got = run("def err(*a):\n"
               "    try:\n"
               "        child_process.spawn(*a)\n"
               "    except OSError as exc:\n"
               "        return [type(exc).__name__, str(exc)]\n"
               "    return None\n"
               "print(json.dumps({'missing': err(['no-such-server-here'], ENV),\n"
               f"  'not_executable': err([{str(plain)!r}], ENV),\n"
               f"  'relative_in_dir': err(['./plain'], ENV, {str(tmp_path)!r}),\n"
               f"  'no_dir': err(['true'], ENV, {str(tmp_path / 'gone')!r}),\n"
               "  'open_fds': sorted(os.listdir('/proc/self/fd'))}))\n")
    assert got["missing"] == ["FileNotFoundError", "[Errno 2] No such file or directory: 'no-such-server-here'"]
    assert got["not_executable"][0] == "PermissionError" and got["relative_in_dir"][0] == "PermissionError"
    assert got["no_dir"][0] == "FileNotFoundError" and "gone" in got["no_dir"][1]
    assert len(got["open_fds"]) < 10  # nothing leaked by the failed launches


def test_nothing_of_troupe_s_but_the_three_pipes_is_inherited(tmp_path, run):
    got = run("r, w = os.pipe()\n"
               "os.set_inheritable(w, True)  # as a library might leave one\n"
               "p = child_process.spawn(['sh', '-c', 'ls /proc/$$/fd'], ENV)\n"
               "fds = sorted(int(x) for x in drain(p.stdout).split()); p.wait(timeout=10)\n"
               f"q = child_process.spawn(['sh', '-c', 'ls /proc/$$/fd'], ENV, {str(tmp_path)!r})\n"
               "fds_in_dir = sorted(int(x) for x in drain(q.stdout).split()); q.wait(timeout=10)\n"
               "print(json.dumps({'leaked': w, 'fds': fds, 'fds_in_dir': fds_in_dir}))\n")
    assert got["leaked"] not in got["fds"] and got["leaked"] not in got["fds_in_dir"]
    assert got["fds"][:3] == [0, 1, 2] and got["fds_in_dir"][:3] == [0, 1, 2]


def test_a_file_exec_cannot_run_is_refused_with_or_without_a_work_dir(tmp_path, run):
    plain = tmp_path / "no-shebang"
    plain.write_text("echo this must never run as a shell script > ran\n")
    plain.chmod(0o755)
    got = run("def err(*a):\n"
               "    try:\n"
               "        child_process.spawn(*a).wait(timeout=10)\n"
               "    except OSError as exc:\n"
               "        return exc.errno\n"
               "    return None\n"
               f"print(json.dumps({{'plain': err([{str(plain)!r}], ENV), 'in_dir': err(['./no-shebang'], ENV, {str(tmp_path)!r})}}))\n")
    assert got == {"plain": 8, "in_dir": 8}  # ENOEXEC, as subprocess says
    assert not (tmp_path / "ran").exists()


def test_a_closed_stdin_reaches_the_server_at_once_even_when_nothing_else_is_due(run):
    """gevent's os.close waits for the loop's next turn; an idle troupe's server saw its EOF only
    when a timer fired (the stop's 0.5 s grace, SIGTERM right after): it must see it at once."""
    got = run("p = child_process.spawn([sys.executable, '-c', 'import sys; sys.stdin.read()'], ENV)\n"
              "p.stdin.close()  # nothing else is due: only the close can end the loop's next poll\n"
              "try:\n"
              "    code = p.wait(timeout=2.0)\n"
              "except subprocess.TimeoutExpired:\n"
              "    code = 'still running'\n"
              "print(json.dumps({'code': code}))\n")
    assert got == {"code": 0}


def test_a_process_dropped_unclosed_leaves_no_descriptor_behind(run):
    got = run("import gc, gevent\n"
              "child_process.spawn(['true'], ENV).wait(timeout=10)  # the hub's own descriptors, first\n"
              "gc.collect()\n"
              "before = len(os.listdir('/proc/self/fd'))\n"
              "p = child_process.spawn(['true'], ENV); p.wait(timeout=10)\n"
              "during = len(os.listdir('/proc/self/fd'))\n"
              "del p; gc.collect()\n"
              "print(json.dumps({'held': during - before, 'left': len(os.listdir('/proc/self/fd')) - before}))\n")
    assert got == {"held": 3, "left": 0}
