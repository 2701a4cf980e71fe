"""Where each MCP client keeps its server list, how to read it, and entry → ServerConfig."""
from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from actors.settings.config import ConfigError, ServerConfig, claude_entry_to_server, from_data

MAX_FILE_BYTES = 1024 * 1024  # default limit; a bigger file is reported and skipped
PLACEHOLDER = "unnamed"  # records are named by the engine after merging

# Which record's connection details win when several sources name one server.
CONFIDENCE_REGISTERED = 1.0
CONFIDENCE_TROUPE = 0.9
CONFIDENCE_PROJECT = 0.85  # a project's own file is more specific than the user's
CONFIDENCE_USER = 0.8
CONFIDENCE_PATH = 0.5

FILE_PROVIDERS = ("claude_desktop", "claude_code", "cursor", "vscode", "windsurf", "troupe")
MCP_SERVERS = "mcpServers"
VSCODE_SERVERS = "servers"


class SourceError(Exception):
    """A file that cannot be used: one line, naming the file, never its contents."""


@dataclass(frozen=True, slots=True)
class Location:
    """One config file a FileProvider reads: its provider, path, scope (user or project) and format;
    for a project file or ~/.claude.json, the project it belongs to."""

    provider: str
    path: Path
    scope: str  # user | project
    fmt: str  # mcpServers | vscode | claude_json
    project: str | None = None  # project directory: default cwd for its servers
    current: str | None = None  # ~/.claude.json: the project troupe runs in (other projects are ignored)

    @property
    def confidence(self) -> float:
        if self.provider == "troupe":
            return CONFIDENCE_TROUPE
        return CONFIDENCE_PROJECT if self.scope == "project" else CONFIDENCE_USER


@dataclass(frozen=True, slots=True)
class Entry:
    """One server definition found in a file."""

    name: str
    spec: Any
    path: str  # key path inside the file, for error messages
    tags: frozenset = frozenset()
    project: str | None = None


def claude_desktop_dirs(home: Path, appdata: str | None = None) -> list[Path]:
    """Every OS's location under this home (the current OS's first), so tests need no OS."""
    mac = home / "Library" / "Application Support" / "Claude"
    linux = home / ".config" / "Claude"
    windows = Path(appdata) / "Claude" if appdata else home / "AppData" / "Roaming" / "Claude"
    order = {"darwin": [mac, linux, windows], "win32": [windows, mac, linux]}.get(sys.platform,
                                                                                 [linux, mac, windows])
    return order


def locations(home: str | os.PathLike, project_root: str | os.PathLike | None,
              appdata: str | None = None) -> list[Location]:
    """All candidate files of every file provider, existing or not (the watcher wants both)."""
    home = Path(home)
    proj = Path(project_root) if project_root else None
    out = [Location("claude_desktop", d / "claude_desktop_config.json", "user", MCP_SERVERS)
           for d in claude_desktop_dirs(home, appdata)]
    current = str(proj) if proj is not None else None
    out += [Location("claude_code", home / ".claude.json", "user", "claude_json", current=current),
            Location("claude_code", home / ".claude" / "settings.json", "user", MCP_SERVERS),
            Location("cursor", home / ".cursor" / "mcp.json", "user", MCP_SERVERS),
            Location("vscode", home / ".config" / "Code" / "User" / "mcp.json", "user", VSCODE_SERVERS),
            Location("vscode", home / "Library" / "Application Support" / "Code" / "User" / "mcp.json",
                     "user", VSCODE_SERVERS),
            Location("windsurf", home / ".codeium" / "windsurf" / "mcp_config.json", "user", MCP_SERVERS),
            Location("troupe", home / ".config" / "troupe" / "registry.json", "user", MCP_SERVERS)]
    if proj is not None:
        p = str(proj)
        out += [Location("claude_code", proj / ".mcp.json", "project", MCP_SERVERS, p),
                Location("claude_code", proj / ".claude" / "settings.json", "project", MCP_SERVERS, p),
                Location("cursor", proj / ".cursor" / "mcp.json", "project", MCP_SERVERS, p),
                Location("vscode", proj / ".vscode" / "mcp.json", "project", VSCODE_SERVERS, p)]
    return out


# ---------------------------------------------------------------- reading

_COMMENT_OR_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)
_TRAILING_COMMA = re.compile(r'"(?:[^"\\]|\\.)*"|,(\s*[}\]])', re.S)


def strip_jsonc(text: str) -> str:
    """VS Code and Cursor accept comments and trailing commas; json does not."""
    # a comment keeps its newlines, so an error's line number still points into the file
    text = _COMMENT_OR_STRING.sub(
        lambda m: m.group(0) if m.group(0).startswith('"') else "\n" * m.group(0).count("\n"), text)
    return _TRAILING_COMMA.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(0), text)


def read_limited(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, refusing one over max_bytes (runs in a worker thread: plain I/O)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise SourceError(f"{path}: {size} bytes is over the {max_bytes}-byte limit; skipped")
        data = fh.read(max_bytes + 1)  # the file may grow between stat and read
    if len(data) > max_bytes:
        raise SourceError(f"{path}: over the {max_bytes}-byte limit; skipped")
    return data


def parse_json(path: Path, data: bytes) -> Any:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); skipped") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise SourceError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); skipped") from None


def entries(loc: Location, data: Any) -> Iterator[Entry]:
    """The server definitions in one parsed file, in file order."""
    if not isinstance(data, dict):
        raise SourceError(f"{loc.path}: top level is not a JSON object; skipped")
    base = frozenset({loc.provider, f"scope:{loc.scope}"})
    key = VSCODE_SERVERS if loc.fmt == VSCODE_SERVERS else MCP_SERVERS
    yield from _section(data.get(key), key, base, loc.project)
    if loc.fmt == "claude_json":
        # Only the project troupe runs in: Claude Code starts another project's local
        # servers only inside that project, and so does troupe (never, here).
        proj, body = current_project_entry(loc, data)
        if body is not None:
            tags = frozenset({loc.provider, "scope:local", f"project:{proj}"})
            yield from _section(body.get(MCP_SERVERS), f"projects.{proj}.{MCP_SERVERS}", tags, proj)


def current_project_entry(loc: Location, data: Any) -> tuple[str | None, dict | None]:
    """(key, body) of ~/.claude.json's `projects` entry for the current project, if any."""
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict) or not loc.current:
        return None, None
    here = os.path.realpath(loc.current)
    for proj, body in projects.items():
        if isinstance(body, dict) and os.path.realpath(os.path.expanduser(str(proj))) == here:
            return proj, body
    return None, None


@dataclass(frozen=True, slots=True)
class ClaudeApprovals:
    """Claude Code's own verdicts on a project's `.mcp.json` servers (by server name)."""

    enabled: frozenset = frozenset()
    disabled: frozenset = frozenset()
    enable_all: bool = False

    def merged(self, other: "ClaudeApprovals") -> "ClaudeApprovals":
        return ClaudeApprovals(self.enabled | other.enabled, self.disabled | other.disabled,
                               self.enable_all or other.enable_all)

    def verdict(self, name: str) -> bool | None:
        if name in self.disabled:
            return False
        return True if self.enable_all or name in self.enabled else None


def _names(value: Any) -> frozenset:
    return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) else frozenset()


def claude_approvals(loc: Location, data: Any) -> ClaudeApprovals:
    """The approval keys of a file the *user* controls: ~/.claude.json's entry for this project
    (written when the user answered Claude Code's prompt) or ~/.claude/settings.json.
    Files inside the project are not asked: a cloned repository cannot approve itself."""
    if loc.provider != "claude_code" or loc.scope != "user" or not isinstance(data, dict):
        return ClaudeApprovals()
    body = current_project_entry(loc, data)[1] if loc.fmt == "claude_json" else data
    if not isinstance(body, dict):
        return ClaudeApprovals()
    return ClaudeApprovals(_names(body.get("enabledMcpjsonServers")), _names(body.get("disabledMcpjsonServers")),
                           body.get("enableAllProjectMcpServers") is True)


def _section(section: Any, path: str, tags: frozenset, project: str | None) -> Iterator[Entry]:
    if isinstance(section, dict):
        for name, spec in section.items():
            yield Entry(str(name), spec, f"{path}.{name}", tags, project)


# ---------------------------------------------------------------- entry → config

def _substitute(value: Any, table: dict[str, str]) -> Any:
    if isinstance(value, str):
        for var, sub in table.items():
            value = value.replace(var, sub)
        return value
    if isinstance(value, list):
        return [_substitute(v, table) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, table) for k, v in value.items()}
    return value


def entry_to_config(name: str, spec: Any, file: str, *, project: str | None = None,
                    home: str | None = None, vscode: bool = False) -> ServerConfig:
    """Validate one Claude-style (or VS Code) entry; ValueError names what is wrong."""
    if vscode:
        # VS Code's own variables; ${input:…} stays, as VS Code would prompt for it.
        table = {"${workspaceFolder}": project or "", "${userHome}": home or ""}
        spec = _substitute(spec, {k: v for k, v in table.items() if v})
    item = claude_entry_to_server(PLACEHOLDER, spec)
    if item is None:
        raise ValueError(f"{file}: {name}: needs `command` (stdio) or `url` (http)")
    stdio = item["transport"].get("stdio")
    if stdio is not None and project and not stdio.get("work_dir"):
        stdio["work_dir"] = project  # clients run a project's servers in the project
    try:
        cfg = from_data({"servers": [item]}, file=file).servers[0]
    except ConfigError as exc:
        # "file:line: servers[0].key: message" → "key: message"; the file is named once
        problems = "; ".join(p.split(": ", 1)[-1].replace("servers[0].", "") for p in exc.problems)
        raise ValueError(f"{file}: {name}: {problems}") from None
    return cfg
