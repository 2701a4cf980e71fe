"""patching: gevent's monkey.patch_all, paying at start only for what a run uses.

Two costs of a plain `monkey.patch_all()` come before troupe can answer its first `initialize`:

- Plugin lookup. patch_all announces each module it patches as an event, and each event looks for
  gevent plugins (setuptools entry points) by reading the metadata of every installed
  distribution: 25 scans, ~0.25 s on this machine with 170 distributions. Here a plain look at the
  `entry_points.txt` files on sys.path (~2 ms) finds the plugins (gevent declares one itself):
  every event calls them as gevent would, and importlib.metadata (~30 ms with the email package
  it loads) is never imported. Only where that look cannot tell (a zip on sys.path) does one
  full read of the metadata serve every event.
- ssl. Patching it imports the stdlib's ssl, which loads OpenSSL: ~4 MiB of RSS and ~15 ms, for a
  module a stdio run with stdio servers never uses. So ssl is patched when it is first imported
  (by requests for an HTTP server, redis, the OTLP exporter, ...): a finder on sys.meta_path
  wraps its loading, and gevent patches the module the moment it exists, before any importer
  sees it. That is what gevent asks for ("patch before ssl is imported"), only later.

Nothing here may import a module that patching replaces (socket, threading, ...): the entry point
imports it first, before anything else.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, cast
from importlib.machinery import ModuleSpec, PathFinder  # importlib.abc would load importlib.resources

if TYPE_CHECKING:
    from importlib.abc import Loader

PLUGIN_GROUP_PREFIX = "gevent.plugins"


def patch_all() -> None:
    """gevent.monkey.patch_all(), with the plugin lookup read at most once and ssl patched on first import."""
    from gevent import events, monkey

    # gevent.monkey looks this up on each event (gevent/monkey/_util.py), so setting it here is enough.
    events.notify_and_call_entry_points = _plugin_notifier(events.notify)  # pyright: ignore[reportAttributeAccessIssue]
    monkey.patch_all(ssl=False)
    if "ssl" in sys.modules:  # an embedding app imported it first: patch it now, as patch_all would
        monkey.patch_ssl()
    elif not any(isinstance(finder, _PatchSslOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchSslOnImport())


def declared_plugins(paths: list[str] | None = None) -> dict[str, list[str]] | None:
    """gevent's plugins declared by the distributions on `paths` (sys.path): event group -> the
    `module:attribute` of each, read from their `entry_points.txt` files without importlib.metadata.
    None when it cannot tell cheaply (an entry that is not a directory, a zip say)."""
    found: dict[str, list[str]] = {}
    for entry in sys.path if paths is None else paths:
        entry = entry or "."
        if not os.path.isdir(entry):
            if os.path.exists(entry):
                return None
            continue
        try:
            with os.scandir(entry) as names:
                dists = sorted(d.path for d in names if d.name.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
        for dist in dists:
            for group, value in _plugin_entries(dist):
                if value not in found.setdefault(group, []):
                    found[group].append(value)
    return found


def _plugin_entries(dist_dir: str) -> list[tuple[str, str]]:
    """(group, value) of each gevent plugin one distribution's entry_points.txt declares."""
    try:
        with open(os.path.join(dist_dir, "entry_points.txt"), encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    if PLUGIN_GROUP_PREFIX not in text:
        return []
    entries, group = [], ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            group = line[1:-1].strip()
        elif "=" in line and group.startswith(PLUGIN_GROUP_PREFIX) and not line.startswith(("#", ";")):
            entries.append((group, line.partition("=")[2].strip()))
    return entries


def _load_entry(value: str) -> Any:
    """What EntryPoint.load() returns for `module:attr.sub [extras]`."""
    import importlib
    module_name, _, attrs = value.split("[")[0].strip().partition(":")
    target: Any = importlib.import_module(module_name.strip())
    for attr in filter(None, attrs.strip().split(".")):
        target = getattr(target, attr)
    return target


def _plugin_notifier(notify):
    """gevent's notify_and_call_entry_points over the plugins read once at start, or, when that
    cannot be told cheaply, over one full read of importlib.metadata's entry points."""
    plugins = declared_plugins()
    if plugins is None:
        from importlib import metadata
        every = metadata.entry_points()  # all groups, read once

        def by_metadata(event) -> None:
            notify(event)
            for plugin in every.select(group=event.ENTRY_POINT_NAME):
                plugin.load()(event)

        return by_metadata

    def by_files(event) -> None:
        notify(event)
        for value in plugins.get(event.ENTRY_POINT_NAME, ()):
            _load_entry(value)(event)

    return by_files


class _PatchSslOnImport:
    """Finds the stdlib's ssl (or gevent.ssl, which imports it) where the path finder would, and
    hands it a loader that lets gevent patch ssl as soon as both have run. Inert once ssl is loaded."""

    WATCHED = ("ssl", "gevent.ssl")

    def find_spec(self, name, path=None, target=None) -> ModuleSpec | None:
        if name not in self.WATCHED or name in sys.modules:
            return None
        spec = PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = cast("Loader", _PatchedAfterExec(spec.loader, name))
        return spec


def _initializing(name: str) -> bool:
    spec = getattr(sys.modules.get(name), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class _PatchedAfterExec:
    """The real loader of ssl or gevent.ssl, then gevent's patch_ssl. When ssl comes first,
    patch_ssl imports gevent.ssl (which finds ssl in sys.modules); when gevent.ssl comes first (an
    app that imports it), its own `import ssl` must not patch from inside it: it patches once
    gevent.ssl has run."""

    def __init__(self, real, name: str) -> None:
        self.real, self.name = real, name

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module) -> None:
        self.real.exec_module(module)
        if self.name == "ssl" and _initializing("gevent.ssl"):
            return  # gevent.ssl is importing ssl: it patches when it is done (below)
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PatchSslOnImport)]
        if self.name == "gevent.ssl":  # the import system names it on gevent only once this returns
            vars(sys.modules["gevent"])["ssl"] = module
        from gevent import monkey
        monkey.patch_ssl()

    def __getattr__(self, name):  # get_filename, get_code, ...: as the real loader answers
        return getattr(self.real, name)
