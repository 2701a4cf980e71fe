"""Launching a stdio server: its command, the environment it inherits, its process. Apart from the
transport (stdio.py) so that troupe's entry point can launch the config's servers before it has
loaded the rest of itself (supervision/early_start.py): this needs only child_process and gevent."""
from __future__ import annotations

import os
from typing import Any

from actors.settings.model import StdioSpec
from actors.transports import child_process
from actors.transports.base import TransportError
from actors.transports.child_process import ChildProcess

# Variables a child inherits from troupe; everything else must be set in `env`.
INHERITED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME",
                 "SHELL", "TERM", "SYSTEMROOT", "NODE_PATH", "VIRTUAL_ENV", "PYTHONPATH")


def child_env(extra: dict | Any) -> dict:
    env = {k: os.environ[k] for k in INHERITED_ENV if k in os.environ}
    env.update(extra or {})
    return env


def spawn(spec: StdioSpec) -> ChildProcess:
    """The server's process, in a session (process group) of its own, with pipes on all three
    streams and only the environment child_env gives it. The one way troupe launches a stdio
    server: the stdio transport's open() and the early start at launch (supervision/early_start.py).
    CPython's C spawner, never a fork of troupe in Python: transports/child_process.py says why."""
    try:
        return child_process.spawn([spec.command, *spec.args], child_env(spec.env), spec.work_dir)
    except (OSError, ValueError) as exc:
        raise TransportError(f"cannot start {spec.command!r}: {exc}") from None
