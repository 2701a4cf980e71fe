"""Where each client keeps its server entries in a parsed document, and each entry in one shape.

A shape turns a document into `Found` entries, each with a plain spec
(`command`, `args`, `env`, `cwd`, `env_file`, `url`, `transport`, `headers`) so that variables,
env files and validation are done once, for every client, in sources.py. An entry troupe
cannot use is still yielded, with the reason it was skipped, so `troupe discover` can say why.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from actors.discovery.clients import HTTP, SSE

STDIO = "stdio"
# every client's spelling of a transport → troupe's
TRANSPORT_NAMES = {
    "stdio": STDIO, "local": STDIO, "command": STDIO,
    "sse": SSE,
    "http": HTTP, "streamable-http": HTTP, "streamable_http": HTTP, "streamablehttp": HTTP, "remote": HTTP,
}


@dataclass(frozen=True, slots=True)
class Found:
    """One server entry as its client wrote it, in the common spec; `skipped` says why it cannot
    be used at all, `disabled` that its client has it switched off (listed, never started)."""

    name: str
    keypath: str
    spec: dict = field(default_factory=dict)
    disabled: bool = False
    skipped: str | None = None
    project: str | None = None  # a ~/.claude.json project entry: the project it belongs to
    local: bool = False  # ~/.claude.json's per-project ("local") scope
    needs: tuple[str, ...] = ()  # what the shape itself could not fill (Codex's named env vars)


@dataclass(frozen=True, slots=True)
class ShapeContext:
    """What a shape needs besides the document: the client's url default, the project troupe
    runs in (for ~/.claude.json), and an env lookup (Codex names env vars instead of values)."""

    url_default: str
    current_project: str | None = None
    lookup: Callable[[str], str | None] = lambda name: None


def _transport(raw: Any, url_default: str, has_url: bool) -> str | None:
    if raw is None or raw == "":
        return url_default if has_url else STDIO
    return TRANSPORT_NAMES.get(str(raw).lower())


def _str_map(value: Any) -> dict:
    return {str(k): v if isinstance(v, str) else str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _common(name: str, keypath: str, raw: Any, ctx: ShapeContext, *, command_key: str = "command",
            args_key: str = "args", env_key: str = "env", url_keys: tuple = ("url", "serverUrl"),
            disabled: bool = False) -> Found:
    """The Claude-style entry most clients share (mcpServers and its cousins)."""
    if not isinstance(raw, dict):
        return Found(name, keypath, skipped="not an object")
    disabled = disabled or raw.get("disabled") is True or raw.get("enabled") is False
    spec: dict[str, Any] = {}
    if raw.get("envFile"):
        spec["env_file"] = str(raw["envFile"])
    command = raw.get(command_key)
    if "httpUrl" in raw and not command:  # Gemini CLI: httpUrl is Streamable HTTP, url is SSE
        spec.update(url=raw["httpUrl"], transport=HTTP, headers=raw.get("headers") or {})
        return Found(name, keypath, spec, disabled)
    url = next((raw[k] for k in url_keys if raw.get(k)), None)
    kind = raw.get("type", raw.get("transport"))
    if command:
        if isinstance(command, list):  # opencode and a few others: the whole launch line as a list
            command, args = (command[0] if command else ""), [*command[1:], *(raw.get(args_key) or [])]
        else:
            args = raw.get(args_key) or []
        if not isinstance(args, list):
            return Found(name, keypath, skipped=f"`{args_key}` is not a list", disabled=disabled)
        # values keep their types: validation (settings.config) names a wrong one, never echoes it
        spec.update(command=command, args=args, env=raw.get(env_key) or {}, transport=STDIO)
        if raw.get("cwd"):
            spec["cwd"] = raw["cwd"]
        return Found(name, keypath, spec, disabled)
    if url:
        transport = _transport(kind, ctx.url_default, True)
        if transport in (None, STDIO):
            return Found(name, keypath, skipped=f"unknown transport type {kind!r}", disabled=disabled)
        spec.update(url=url, transport=transport, headers=raw.get("headers") or {})
        return Found(name, keypath, spec, disabled)
    return Found(name, keypath, skipped="needs `command` (stdio) or `url` (http)", disabled=disabled)


def _section(section: Any, keypath: str, ctx: ShapeContext, **kw) -> Iterator[Found]:
    if isinstance(section, dict):
        for name, raw in section.items():
            yield _common(str(name), f"{keypath}.{name}", raw, ctx, **kw)


def mcp_servers(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """`mcpServers: {name: {command, args, env, cwd, envFile} | {url, type, headers}}`."""
    yield from _section(doc.get("mcpServers"), "mcpServers", ctx)


def claude_json(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """~/.claude.json: user servers, then the current project's ("local") ones. Another project's
    servers are Claude Code's to start inside that project, never troupe's."""
    yield from mcp_servers(doc, ctx)
    proj, body = current_project_entry(doc, ctx.current_project)
    if body is not None:
        for found in _section(body.get("mcpServers"), f"projects.{proj}.mcpServers", ctx):
            yield Found(found.name, found.keypath, found.spec, found.disabled, found.skipped, proj, True)


def current_project_entry(doc: Any, current: str | None) -> tuple[str | None, dict | None]:
    """(key, body) of ~/.claude.json's `projects` entry for the current project, if any."""
    projects = doc.get("projects") if isinstance(doc, dict) else None
    if not isinstance(projects, dict) or not current:
        return None, None
    here = os.path.realpath(current)
    for proj, body in projects.items():
        if isinstance(body, dict) and os.path.realpath(os.path.expanduser(str(proj))) == here:
            return proj, body
    return None, None


def vscode(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """VS Code's mcp.json: `servers: {…}` (and `inputs`, which are prompts troupe cannot show)."""
    yield from _section(doc.get("servers"), "servers", ctx)


def vscode_settings(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """VS Code's settings.json before mcp.json: `"mcp": {"servers": {…}}`."""
    mcp = doc.get("mcp")
    if isinstance(mcp, dict):
        yield from _section(mcp.get("servers"), "mcp.servers", ctx)


def continue_(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """Continue: YAML `mcpServers: [{name, command, args, env, type, url}]`; a JSON block file
    copied from another client has the `mcpServers: {name: …}` map instead."""
    section = doc.get("mcpServers")
    if isinstance(section, dict):
        yield from _section(section, "mcpServers", ctx)
        return
    if not isinstance(section, list):
        return
    for i, raw in enumerate(section):
        name = raw.get("name") if isinstance(raw, dict) else None
        if not name:
            yield Found(f"#{i}", f"mcpServers[{i}]", skipped="has no `name`")
            continue
        if isinstance(raw.get("requestOptions"), dict) and "headers" not in raw:
            raw = {**raw, "headers": raw["requestOptions"].get("headers")}
        yield _common(str(name), f"mcpServers[{i}]", raw, ctx)


def zed(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """Zed: `context_servers: {name: {command, args, env} | {url, headers}}`, `enabled`; older
    settings nest the launch line as `command: {path, args, env}`."""
    section = doc.get("context_servers")
    if not isinstance(section, dict):
        return
    for name, raw in section.items():
        keypath = f"context_servers.{name}"
        if isinstance(raw, dict) and isinstance(raw.get("command"), dict):
            inner = raw["command"]
            raw = {**raw, "command": inner.get("path"), "args": inner.get("args"), "env": inner.get("env")}
        if isinstance(raw, dict) and raw.get("source") == "extension" and not raw.get("command"):
            yield Found(str(name), keypath, skipped="a Zed extension: Zed itself installs and runs it")
            continue
        yield _common(str(name), keypath, raw, ctx)


def codex(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """Codex CLI's TOML `[mcp_servers.X]`: `command/args/env/env_vars/cwd` or
    `url/bearer_token_env_var/http_headers/env_http_headers`; `enabled = false`.
    Codex names env vars rather than values: a header whose variable is unset is unresolved."""
    section = doc.get("mcp_servers")
    if not isinstance(section, dict):
        return
    for name, raw in section.items():
        if not isinstance(raw, dict):
            yield Found(str(name), f"mcp_servers.{name}", skipped="not a table")
            continue
        raw, needs = dict(raw), []
        if raw.get("command"):
            env = _str_map(raw.get("env"))
            for var in raw.get("env_vars") or []:
                value = ctx.lookup(str(var))
                if value is not None:  # Codex forwards only what is set
                    env.setdefault(str(var), value)
            raw["env"] = env
        else:
            headers = _str_map(raw.get("http_headers"))
            named = dict(_str_map(raw.get("env_http_headers")))
            if raw.get("bearer_token_env_var"):
                named["Authorization"] = str(raw["bearer_token_env_var"])
            for header, var in named.items():
                value = ctx.lookup(var)
                if value is None:
                    needs.append(f"${var}")
                else:
                    headers[header] = f"Bearer {value}" if header == "Authorization" and "bearer_token_env_var" in raw \
                        and var == raw["bearer_token_env_var"] else value
            raw["headers"] = headers
        found = _common(str(name), f"mcp_servers.{name}", raw, ctx)
        yield replace(found, needs=tuple(needs)) if needs else found


GOOSE_INTERNAL = frozenset({"builtin", "platform", "frontend", "inline_python"})


def goose(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """Goose: `extensions: {id: {enabled, type, cmd, args, envs, uri, headers}}`; its builtin
    extensions run inside Goose and are skipped."""
    section = doc.get("extensions")
    if not isinstance(section, dict):
        return
    for ext_id, raw in section.items():
        keypath = f"extensions.{ext_id}"
        if not isinstance(raw, dict):
            yield Found(str(ext_id), keypath, skipped="not a mapping")
            continue
        kind = str(raw.get("type") or "").lower()
        if kind in GOOSE_INTERNAL:
            yield Found(str(ext_id), keypath, skipped=f"a Goose {kind} extension runs inside Goose",
                        disabled=raw.get("enabled") is False)
            continue
        yield _common(str(ext_id), keypath, {**raw, "url": raw.get("uri")}, ctx, command_key="cmd",
                      env_key="envs")


def opencode(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """opencode: `mcp: {name: {type: local, command: [...], environment, enabled} |
    {type: remote, url, headers, enabled}}`."""
    section = doc.get("mcp")
    if not isinstance(section, dict):
        return
    for name, raw in section.items():
        keypath = f"mcp.{name}"
        if isinstance(raw, dict) and raw.get("type") == "remote":
            raw = {**raw, "type": None}  # opencode tries Streamable HTTP first
        yield _common(str(name), keypath, raw, ctx, env_key="environment")


def approvals(doc: dict, ctx: ShapeContext) -> Iterator[Found]:
    """A file read only for the approval keys it holds (~/.claude/settings.json)."""
    return iter(())


SHAPES: dict[str, Callable[[dict, ShapeContext], Iterator[Found]]] = {
    "mcpServers": mcp_servers, "claude_json": claude_json, "vscode": vscode, "vscode_settings": vscode_settings,
    "continue": continue_, "zed": zed, "codex": codex, "goose": goose, "opencode": opencode,
    "approvals": approvals,
}
