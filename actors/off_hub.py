"""off_hub: a system call that waits on the disk or on another process, run in gevent's threadpool.

A greenlet that calls fsync or a blocking flock stops the hub, and with it every client's call,
for as long as the disk or the lock's holder takes: troupe's running record, rewritten as 50
servers started, held the hub 20-66 ms in its fsync (py-spy, on this machine's disk; it needs none
now, see trust/running.py), and an approvals file locked by a `troupe approve` in another process
holds it until that one is done.
`blocking` runs such a call in a worker thread while only the calling greenlet waits (the call
releases the GIL). Outside a patched process (a unit test, a tool importing a module) there is no
hub to keep free, and the call runs where it is.
"""
from __future__ import annotations

from typing import Callable, TypeVar

import gevent
from gevent import monkey

T = TypeVar("T")


def blocking(call: Callable[..., T], *args) -> T:
    """call(*args), off the hub when this is a greenlet of a patched troupe (the hub greenlet
    itself, a libev callback, cannot wait: there it runs in place)."""
    if monkey.is_module_patched("threading") and gevent.getcurrent() is not gevent.get_hub():
        return gevent.get_hub().threadpool.apply(call, args)
    return call(*args)
