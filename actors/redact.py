"""Launch lines and URLs made fit to show: secret values replaced by `***`."""
from __future__ import annotations

import re
from typing import Iterable
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"
# A flag or variable whose name holds one of these carries a secret as its value.
SECRET_NAME = re.compile(r"key|token|secret|password|passwd|auth|credential|apikey", re.I)
# --name=value, --name value, and Go-style -name=value; a one-letter -k is left alone,
# since one letter says nothing about what follows.
_FLAG = re.compile(r"^(--?)([A-Za-z][A-Za-z0-9_.-]+)(=.*)?$", re.S)
# NAME=value as a positional argument (what `env API_KEY=x server` passes on).
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)=", re.S)
# "Authorization: Bearer x", the way mcp-remote and friends take extra headers.
_HEADER = re.compile(r"^([A-Za-z][A-Za-z0-9_-]*):", re.S)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# A following argument that is itself a long flag is not the secret flag's value.
_LONG_FLAG = re.compile(r"^--[A-Za-z]")


def _query(query: str) -> str:
    # Every value, whatever its key: a gateway cannot know which parameter is a credential.
    parts = re.split(r"([&;])", query)
    return "".join(p if p in "&;" else (p.split("=", 1)[0] + "=" + REDACTED if "=" in p else REDACTED)
                   for p in parts)


def redact_url(url: str) -> str:
    """The URL with every query value, a password (or a lone user, often a token) and
    the fragment replaced; scheme, host, port, path and query keys stay readable."""
    try:
        parts = urlsplit(url)
        userinfo, at, hostport = parts.netloc.rpartition("@")
        if at:
            user, colon, _ = userinfo.partition(":")
            userinfo = f"{user}:{REDACTED}" if colon else REDACTED
        netloc = f"{userinfo}{at}{hostport}"
        query = _query(parts.query) if parts.query else ""
        fragment = REDACTED if parts.fragment else ""
        return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:  # unparseable (a broken IPv6 host): nothing of it is safe to show
        return REDACTED


def _positional(arg: str) -> str:
    """A value with no secret flag before it: `NAME=x`, `Header: x` or a URL may still hold one."""
    if _URL.match(arg):
        return redact_url(arg)
    for pattern, sep in ((_ASSIGN, "="), (_HEADER, ": ")):
        named = pattern.match(arg)
        if named and SECRET_NAME.search(named.group(1)):
            return f"{named.group(1)}{sep}{REDACTED}"
    return arg


def _redact_arg(arg: str) -> tuple[str, bool]:
    """(the argument fit to show, whether the next argument is this flag's secret value)."""
    flag = _FLAG.match(arg)
    if flag:
        dashes, name, value = flag.groups()
        if SECRET_NAME.search(name):
            return (f"{dashes}{name}={REDACTED}" if value is not None else arg), value is None
        return (f"{dashes}{name}={_positional(value[1:])}" if value else arg), False
    return (arg if arg.startswith("-") else _positional(arg)), False


def redact_args(args: Iterable) -> list[str]:
    """Arguments fit to show: `--api-key=x` → `--api-key=***`, `--token x` → `--token ***`,
    `API_KEY=x` → `API_KEY=***`, and URLs as redact_url shows them."""
    out: list[str] = []
    takes_value = False
    for arg in map(str, args):
        if takes_value and not _LONG_FLAG.match(arg):
            out.append(REDACTED)
            takes_value = False
            continue
        shown, takes_value = _redact_arg(arg)
        out.append(shown)
    return out


def launch_facts(command: str | None, args: Iterable = (), url: str | None = None) -> dict:
    """What a status report may show of how a server is reached: never env or header values."""
    if command is not None:
        return {"command": command, "args": redact_args(args)}
    return {"url": redact_url(url) if url else None}
