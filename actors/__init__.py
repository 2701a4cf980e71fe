"""troupe: an MCP aggregator built from actors. Importing this has no side effects."""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__", "start", "wsgi_app"]


def start(config=None, **kw):
    """Start troupe inside this gevent-patched process; returns an `actors.embed.Troupe` handle.

    `config`: a troupe dict, a Claude-style {"mcpServers": …} dict, a YAML/JSON path, or an
    `actors.settings.config.Config`; None = the embedded default. Raises `actors.embed.NotPatchedError`
    unless the host called `gevent.monkey.patch_all()` first. See `actors.embed.start`.
    """
    from actors.embed import start as _start  # imported here: `import actors` stays free of side effects
    return _start(config, **kw)


def wsgi_app(handle, **kw):
    """troupe's HTTP endpoints as a WSGI app to mount in the host's own server (one port for both)."""
    from actors.embed import wsgi_app as _wsgi_app
    return _wsgi_app(handle, **kw)
