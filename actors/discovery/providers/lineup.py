"""Which provider actors a DiscoveryEngine starts for its settings, and what its watcher watches:
the client config files those providers read, and the PATH directories the path probe scans."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

import pykka

from actors.discovery.providers.files import FileProvider
from actors.discovery.providers.pathprobe import PathProbeProvider
from actors.discovery.settings import PATH_PROVIDER, DiscoverySettings
from actors.discovery.sources import locations, watched_paths


def start_providers(s: DiscoverySettings, providers: dict[str, pykka.ActorRef]) -> Callable[[], tuple]:
    """Start the enabled providers into `providers` (filled as they start, so a caller that
    fails half-way can still stop the ones already running); returns what tells the paths to
    watch, asked again at each poll since globbed locations gain and lose files."""
    # %APPDATA% belongs to the real user: only used when searching the real home
    appdata = os.environ.get("APPDATA") if sys.platform == "win32" and s.home == str(Path.home()) else None
    env = dict(os.environ)  # the variables client files refer to are troupe's own environment's
    locs = tuple(locations(s.home, s.project_root, appdata, system_root=s.system_root, env=env))
    for provider in s.providers:
        if provider == PATH_PROVIDER:
            if s.path_enabled:
                providers[provider] = PathProbeProvider.start(
                    search_path=s.path_search, home=s.home, allowlist=s.path_allowlist,
                    timeout=s.path_timeout, concurrency=s.path_concurrency, auto_connect=s.path_auto_connect)
            continue
        providers[provider] = FileProvider.start(
            provider, locs, home=s.home, search_path=s.path_search, max_file_bytes=s.max_file_bytes,
            max_claude_json_bytes=s.max_claude_json_bytes, auto_connect=s.auto_client_configs, env=env)
    read = tuple(loc for loc in locs if loc.provider in providers)
    dirs = [d for d in s.path_search.split(os.pathsep) if d] if PATH_PROVIDER in providers else []
    return lambda: tuple(dict.fromkeys([*watched_paths(read), *dirs]))
