"""patching: gevent's monkey.patch_all, with its plugin lookup done once instead of 25 times.

patch_all announces each module it patches as an event, and each event looks for gevent plugins
(setuptools entry points) by reading the metadata of every installed distribution: 25 scans,
~0.25 s of a ~0.45 s patch on this machine with 170 distributions, before troupe can answer its
first `initialize`. Here the one scan serves every event: plugins are still found and called as
gevent would call them; only the repeated reading goes.

Nothing here may import a module that patching replaces (socket, threading, ...): the entry point
imports it first, before anything else.
"""
from __future__ import annotations

from importlib import metadata


def patch_all() -> None:
    """gevent.monkey.patch_all(), every plugin event answered from one read of the entry points."""
    from gevent import monkey

    scan = metadata.entry_points
    every = scan()  # all groups, read once

    def entry_points(**params):
        return every.select(**params) if params else every

    metadata.entry_points = entry_points
    try:
        monkey.patch_all()
    finally:
        metadata.entry_points = scan
