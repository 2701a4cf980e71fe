"""Embedding troupe in a gevent application: `start(config)` returns a `Troupe` handle."""
from __future__ import annotations

import os
from typing import Any, Callable

# Only light imports here: a host may import this module before it patches, and pykka
# (pulled in by the runtime) must first be imported in a patched process.
from actors.handle import McpError, ToolError, Troupe

__all__ = ["McpError", "NotPatchedError", "ToolError", "Troupe", "check_patched", "load_config", "mount", "start",
           "wsgi_app"]

REQUIRED_PATCHES = ("threading", "queue", "socket")
PATCH_HINT = "from gevent import monkey; monkey.patch_all()"


class NotPatchedError(RuntimeError):
    """The host process is not gevent-patched the way troupe's actors need."""


def check_patched() -> None:
    """Refuse to start in a process where pykka's threads would be real threads (it would hang)."""
    from gevent import monkey
    missing = [m for m in REQUIRED_PATCHES if not monkey.is_module_patched(m)]
    if missing:
        raise NotPatchedError(
            f"troupe needs a gevent-patched process, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not patched. Put `{PATCH_HINT}` first thing in your "
            "program, before any other import, and do not pass thread=False (gunicorn's gevent worker "
            "and Locust already do this). Unpatched, troupe's actors would block your whole app.")


def load_config(config: Any = None):
    """A Config from a troupe dict, a {"mcpServers": …} dict, a YAML/JSON path, or a Config."""
    from actors.settings import config as config_mod
    if config is None:
        return config_mod.load(None)
    if isinstance(config, config_mod.Config):
        return config
    if isinstance(config, (str, os.PathLike)):
        return config_mod.load(config)
    if isinstance(config, dict):
        return config_mod.from_data(config)
    raise TypeError(f"config must be a dict, a path or an actors.settings.config.Config, not {type(config).__name__}")


def start(config: Any = None, *, discovery: bool | None = None, policy=None, home: str | None = None,
          project_root: str | None = None) -> "Troupe":
    """Start troupe's actors in this process and return a handle; raises NotPatchedError first.

    `discovery`: None follows the config's `discovery.enabled`; with no config at all (the
    embedded default) it stays off, so a host app never starts servers from a desktop client's
    config files unless asked.
    """
    check_patched()
    cfg = load_config(config)
    if discovery is None and config is None:
        discovery = False
    from actors.runtime import Runtime
    runtime = Runtime(cfg, policy=policy, discovery=discovery, home=home, project_root=project_root).start()
    try:
        return Troupe(runtime)
    except BaseException:
        runtime.stop()
        raise


def wsgi_app(handle: "Troupe", *, bound_host: str | None = None):
    """troupe's HTTP endpoints (/mcp, /sse, /status, /events…) as a WSGI app for the host's server.

    `bound_host` is the address the host's server listens on (for the Host-header check; names
    other than loopback need `serve.allowed_hosts`). The app is closed by `handle.stop()`.
    """
    from actors.serve.http import App
    app = App(handle.runtime, bound_host)
    handle._apps.append(app)
    return app


def mount(prefix: str, app: Callable, fallback: Callable) -> Callable:
    """A WSGI dispatcher: requests under `prefix` go to `app` (SCRIPT_NAME/PATH_INFO split), others to `fallback`."""
    prefix = "/" + prefix.strip("/")

    def dispatch(environ, start_response):
        path = environ.get("PATH_INFO") or "/"
        if path == prefix or path.startswith(prefix + "/"):
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + prefix
            environ["PATH_INFO"] = path[len(prefix):] or "/"
            return app(environ, start_response)
        return fallback(environ, start_response)
    return dispatch
