"""Service identity (whole launch line or whole URL), its shown form, and name sanitising."""
from __future__ import annotations

import os
import re
import shlex
import shutil
from typing import Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

from actors.settings.config import SERVER_NAME, ServerConfig
from actors.redact import REDACTED, redact_args, redact_url

# Package runners: the package and its args are the server, the runner alone is not.
LAUNCHERS = frozenset({"npx", "pnpx", "bunx", "uvx", "pipx", "pnpm", "yarn", "uv", "bun", "deno"})
# Runners whose "assume yes" flag changes nothing about what runs.
YES_FLAGS = {"npx": ("-y", "--yes"), "pnpx": ("-y", "--yes"), "bunx": ("-y", "--yes")}
LATEST_SUFFIX = "@latest"
DEFAULT_PORTS = {"http": 80, "https": 443}
MAX_NAME = 64
FALLBACK_NAME = "server"

Which = Callable[[str], "str | None"]


def which_on(path: str | None) -> Which:
    """A resolver over one PATH string (the one discovery was configured with)."""
    return lambda name: shutil.which(name, path=path)


def _stem(command: str) -> str:
    base = os.path.basename(command.replace("\\", "/"))
    for ext in (".exe", ".cmd", ".bat"):
        if base.lower().endswith(ext):
            return base[: -len(ext)]
    return base


def normalise_command(command: str, which: Which | None = None) -> str:
    """An absolute path becomes its basename when PATH resolves that basename to the
    same binary (so `/usr/bin/node` and `node` match); otherwise its realpath."""
    if not os.path.isabs(command):
        return _stem(command) if _stem(command).lower() in LAUNCHERS else command
    real = os.path.realpath(command)
    if which is not None:
        # the name it was called by, then the binary's own name (for a symlink elsewhere)
        for base in dict.fromkeys((os.path.basename(command), os.path.basename(real))):
            found = which(base)
            if found and os.path.realpath(found) == real:
                return _stem(base) if _stem(base).lower() in LAUNCHERS else base
    return real


def launch_line(command: str, args: Iterable[str], which: Which | None = None) -> list[str]:
    cmd = normalise_command(command, which)
    args = [str(a) for a in args]
    launcher = _stem(cmd).lower()
    if launcher in LAUNCHERS:
        drop = YES_FLAGS.get(launcher, ())
        args = [a for a in args if a not in drop]
        args = [a[: -len(LATEST_SUFFIX)] if a.endswith(LATEST_SUFFIX) and len(a) > len(LATEST_SUFFIX) else a
                for a in args]
    return [cmd, *args]


def normalise_url(url: str) -> str:
    """Lowercase scheme and host, drop the default port, the fragment and a trailing slash."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None or DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if parts.username is not None:
        userinfo = parts.username + (f":{parts.password}" if parts.password is not None else "")
        netloc = f"{userinfo}@{netloc}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def identity_of(config: ServerConfig, which: Which | None = None) -> str:
    """What makes two records the same server: never a bare runner, never a URL's tail."""
    if config.stdio is not None:
        return "stdio:" + shlex.join(launch_line(config.stdio.command, config.stdio.args, which))
    if config.http is not None:
        return "url:" + normalise_url(config.http.url)
    raise ValueError(f"{config.name}: neither stdio nor http")


def redact_identity(identity: str) -> str:
    """An identity fit to show; the unredacted one stays the key for merging and approval."""
    kind, _, rest = identity.partition(":")
    if kind == "url":
        return "url:" + redact_url(rest)
    if kind == "stdio":
        try:
            command, *args = shlex.split(rest)
        except ValueError:  # not one of ours: show nothing of it rather than a secret
            return "stdio:" + REDACTED
        return "stdio:" + shlex.join([command, *redact_args(args)])
    return identity


def sanitise_name(name: str) -> str:
    """A valid ServerConfig name from whatever a config file used as a key."""
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", str(name))
    clean = re.sub(r"^[^A-Za-z0-9]+", "", clean)[:MAX_NAME].rstrip("-.")
    return clean if clean and SERVER_NAME.match(clean) else FALLBACK_NAME


def unique_name(base: str, taken: set[str]) -> str:
    """base, or base-2, base-3… trimmed so the result stays a valid name."""
    if base not in taken:
        return base
    n = 2
    while True:
        suffix = f"-{n}"
        candidate = base[: MAX_NAME - len(suffix)].rstrip("-.") + suffix
        if candidate not in taken:
            return candidate
        n += 1
