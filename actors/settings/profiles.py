"""The `profiles:` section and `serve.clients`: who the clients of troupe's HTTP front are (a
name and a bearer token each) and which part of the catalogue each one's profile shows.

    profiles:
      readers: {servers: [docs, github], tools: {allow: ["github__get_*"], deny: []}, read_only: true,
                max_sessions: 20}           # open HTTP sessions per client (default 100)
      everything: {}
    serve:
      clients:
        - {name: alice, token_env: ALICE_TOKEN, profile: readers}
        - {name: ci, token: "${CI_TOKEN}"}          # no profile: sees everything

A token is a secret: no problem reported here ever quotes one.
"""
from __future__ import annotations

import os
from types import MappingProxyType
from typing import Any, Callable, Mapping

from actors.catalogue.profile import Profile
from actors.settings.model import DEFAULT_CLIENT_SESSIONS, ClientEntry

_PROFILE_KEYS = {"servers", "tools", "read_only", "max_sessions", "rate"}  # rate: settings/rate_section.py
_CLIENT_KEYS = {"name", "token", "token_env", "profile"}


def parse(data: Any, check) -> Mapping[str, Profile]:
    """Every profile by name (an empty mapping without the section)."""
    if data is None:
        return MappingProxyType({})
    if not isinstance(data, dict):
        check.fail("profiles", "must be a mapping of profile names to profiles")
        return MappingProxyType({})
    out: dict[str, Profile] = {}
    for name, body in data.items():
        path = f"profiles.{name}"
        body = {} if body is None else body
        if not isinstance(body, dict):
            check.fail(path, "must be a mapping (servers, tools, read_only, max_sessions), or {} for everything")
            continue
        check.unknown_keys(body, _PROFILE_KEYS, path)
        servers = _strings(body, "servers", path, check)
        tools = check.typed(body, "tools", path, dict, {}) or {}
        check.unknown_keys(tools, {"allow", "deny"}, f"{path}.tools")
        quota = check.typed(body, "max_sessions", path, int, DEFAULT_CLIENT_SESSIONS)
        if quota < 1:
            check.fail(f"{path}.max_sessions", "must be at least 1 session")
            quota = DEFAULT_CLIENT_SESSIONS
        out[str(name)] = Profile(str(name), frozenset(servers) if servers is not None else None,
                                 tuple(_strings(tools, "allow", f"{path}.tools", check) or ()),
                                 tuple(_strings(tools, "deny", f"{path}.tools", check) or ()),
                                 check.typed(body, "read_only", path, bool, False), quota)
    return MappingProxyType(out)


def _strings(data: Mapping, key: str, path: str, check) -> list[str] | None:
    values = check.typed(data, key, path, list)
    if values is None:
        return None
    bad = [i for i, v in enumerate(values) if not isinstance(v, str) or not v]
    for i in bad:
        check.fail(f"{path}.{key}[{i}]", "must be a non-empty string")
    return [v for v in values if isinstance(v, str) and v]


def named(name: str | None, path: str, check, profiles: Mapping[str, Profile]) -> str | None:
    """A profile name that must exist (None stays None: everything)."""
    if name is not None and name not in profiles:
        known = ", ".join(sorted(profiles)) or "none defined"
        check.fail(path, f"no profile named {name!r} (profiles: {known})")
        return None
    return name


def clients(data: Any, check, profiles: Mapping[str, Profile],
            expand: Callable[[str, Mapping[str, str]], str]) -> tuple[ClientEntry, ...]:
    """serve.clients: each a unique name, one token (given, or read from token_env), a profile."""
    if data is None:
        return ()
    if not isinstance(data, list):
        check.fail("serve.clients", "must be a list of {name, token | token_env, profile}")
        return ()
    out: list[ClientEntry] = []
    for i, item in enumerate(data):
        path = f"serve.clients[{i}]"
        if not isinstance(item, dict):
            check.fail(path, "must be a mapping {name, token | token_env, profile}")
            continue
        check.unknown_keys(item, _CLIENT_KEYS, path)
        name = check.typed(item, "name", path, str)
        if not name:
            check.fail(f"{path}.name", "every client needs a name (it is what status and metrics show)")
            continue
        if any(c.name == name for c in out):
            check.fail(f"{path}.name", f"duplicate client name {name!r}")
        token = _token(item, path, check, expand)
        if token is not None and any(c.token == token for c in out):
            check.fail(path, "two clients have the same token (each token must name one client)")
        profile = named(check.typed(item, "profile", path, str), f"{path}.profile", check, profiles)
        if token is not None:
            out.append(ClientEntry(name, token, profile))
    return tuple(out)


def _token(item: Mapping, path: str, check, expand) -> str | None:
    given, env = item.get("token"), item.get("token_env")
    if (given is None) == (env is None):
        check.fail(path, "needs exactly one of token and token_env")
        return None
    if given is not None:
        if not isinstance(given, str):
            check.fail(f"{path}.token", "must be a string")  # never echoed: a secret
            return None
        token = expand(given, {})
        if not token or token.startswith("${"):
            check.fail(f"{path}.token", "is empty (or names an unset variable)")
            return None
        return token
    if not isinstance(env, str) or not env:
        check.fail(f"{path}.token_env", "must name an environment variable")
        return None
    token = os.environ.get(env)
    if not token:
        check.fail(f"{path}.token_env", f"${env} is not set")
        return None
    return token
