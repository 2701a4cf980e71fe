"""Where a server came from, and the one gate every launch and probe goes through."""
from __future__ import annotations

import os
import time

from actors.settings.config import ServerConfig

CONFIG = "config"  # troupe's own config file (or the embedding app's config dict)
USER = "user"  # user-scope client files: Claude Desktop, ~/.claude.json, ~/.cursor/mcp.json, …
PROJECT = "project"  # files inside the project directory troupe was started in
PATH = "path"  # found by the PATH probe
REGISTERED = "registered"  # core_mcpserver_register or the embedding API's register_server
ALL = (CONFIG, USER, PROJECT, PATH, REGISTERED)
# What the owner wrote down themselves starts as configured; the rest waits for an operator.
TRUSTED = frozenset({CONFIG, USER})

ALLOWED, PENDING, DENIED = "allowed", "pending-approval", "denied"
NEEDS_INPUT = "needs-input"  # a discovered entry with a variable nobody can fill: never launched with it
# A launch line's key reads the file system (realpath, a PATH search): ~0.5 ms, asked for several
# times per server as it starts (its gate, its era, the running record), 50 servers at once. Within
# this many seconds the answer read is reused; after it, the file system is read again, so a
# binary that moved on PATH is another server to approve, as before.
IDENTITY_FRESH_S = 1.0
RECENT_MAX = 4096
_recent: dict[tuple, tuple[float, str]] = {}  # (command, args, PATH) -> (when read, identity)


def identity_key(config: ServerConfig) -> str:
    """What an approval and a pin are keyed by: the whole launch line or the whole URL."""
    if config.identity:
        return config.identity
    from actors.discovery.identity import identity_of, which_on
    path = os.environ.get("PATH")
    if config.stdio is None:
        return identity_of(config, which_on(path))  # a URL: no file system to read
    key, now = (config.stdio.command, tuple(config.stdio.args), path), time.monotonic()
    recent = _recent.get(key)
    if recent is not None and now - recent[0] < IDENTITY_FRESH_S:
        return recent[1]
    identity = identity_of(config, which_on(path))
    if len(_recent) >= RECENT_MAX:
        _recent.clear()
    _recent[key] = (now, identity)
    return identity


def identity_keys(config: ServerConfig) -> tuple[str, ...]:
    """Every key a troupe may give this launch line, whatever its PATH: an absolute command is
    keyed by its name when that troupe's PATH finds the same binary under it, else by its real
    path. An operator deciding offline (no running troupe to ask) records both, so the decision
    covers the launch line as configured and not only the approving shell's PATH."""
    keys = [identity_key(config)]
    if not config.identity and config.stdio is not None:
        from actors.discovery.identity import identity_of
        keys.append(identity_of(config, None))
    return tuple(dict.fromkeys(keys))


def verdict(config: ServerConfig, decisions) -> str:
    """ALLOWED, PENDING, DENIED or NEEDS_INPUT for this exact launch line, given the operator's decisions.

    `decisions` maps identity → "approved" | "denied" (TrustSnapshot.decisions).
    An operator's denial wins over everything; a client's own denial (Claude Code's
    disabledMcpjsonServers) too. Approval covers the identity, so an edited command
    line is a new server that waits again.
    """
    decided = decisions.get(identity_key(config))
    if decided == "denied" or config.preapproved is False:
        return DENIED
    if config.needs_input:  # no approval makes `${input:token}` a value
        return NEEDS_INPUT
    if config.provenance in TRUSTED or decided == "approved" or config.preapproved is True:
        return ALLOWED
    return PENDING


def approve_hint(name: str, config_file: str | None = None, command: str = "approve") -> str:
    """The command that decides `name`, as it must be typed from any directory: plain when
    `troupe approve` finds the running troupe by itself (its record beside the approvals file, see
    actors/trust/running.py), with `--config FILE` (absolute) when only that config says where the
    approvals live (trust.approvals_file, a cluster, discovery.home) or which server is meant."""
    import shlex
    return f"troupe {command} {shlex.quote(name)}" + (f" --config {shlex.quote(config_file)}" if config_file else "")


def shown_launch(config: ServerConfig) -> str:
    """The launch line or URL as an operator may see it: secrets redacted."""
    import shlex

    from actors.redact import redact_args, redact_url
    if config.stdio is not None:
        return shlex.join([config.stdio.command, *redact_args(config.stdio.args)])
    return redact_url(config.http.url) if config.http is not None else ""
