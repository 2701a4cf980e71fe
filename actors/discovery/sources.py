"""Client config files as Locations (from the clients table), their entries resolved, entry → ServerConfig."""
from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from actors.discovery import formats, shapes
from actors.discovery.clients import CLIENTS, FILE_PROVIDERS, HTTP, VSCODE_FAMILY
from actors.discovery.formats import SourceError, parse_json, read_limited
from actors.discovery.shapes import SHAPES, ShapeContext, current_project_entry
from actors.discovery.variables import Context, expand, read_env_file
from actors.settings.config import ConfigError, ServerConfig, from_data, transport_item

__all__ = ["FILE_PROVIDERS", "SourceError", "parse_json", "read_limited", "Location", "Entry", "locations",
           "entries", "entry_to_config", "claude_approvals", "ClaudeApprovals", "watched_paths"]
MCP_SERVERS = "mcpServers"

MAX_FILE_BYTES = 1024 * 1024  # default limit; a bigger file is reported and skipped
PLACEHOLDER = "unnamed"  # records are named by the engine after merging

# Which record's connection details win when several sources name one server.
CONFIDENCE_REGISTERED = 1.0
CONFIDENCE_TROUPE = 0.9
CONFIDENCE_PROJECT = 0.85  # a project's own file is more specific than the user's
CONFIDENCE_USER = 0.8
CONFIDENCE_PATH = 0.5



@dataclass(frozen=True, slots=True)
class Location:
    """One config file a FileProvider reads (a concrete path, or a glob of them): its client,
    scope (user, project or managed), format, shape, variable dialect and url default; for a
    project file or ~/.claude.json, the project it belongs to."""

    provider: str
    path: Path
    scope: str  # user | project | managed
    shape: str = MCP_SERVERS  # see shapes.SHAPES
    fmt: str = "json"  # json | toml | yaml
    dialect: str = "claude"  # see variables.DIALECTS
    url_default: str = HTTP
    project: str | None = None  # project directory: default cwd for its servers
    current: str | None = None  # ~/.claude.json: the project troupe runs in (other projects are ignored)

    @property
    def confidence(self) -> float:
        if self.provider == "troupe":
            return CONFIDENCE_TROUPE
        return CONFIDENCE_PROJECT if self.scope == "project" else CONFIDENCE_USER

    @property
    def is_glob(self) -> bool:
        return "*" in str(self.path)

    def expand(self) -> list["Location"]:
        """The files a glob matches now (sorted), or this location itself."""
        if not self.is_glob:
            return [self]
        # only the `*` component is a pattern: a home named "a[1]" must not become one
        pattern = os.path.join(*(part if "*" in part else glob.escape(part) for part in self.path.parts))
        return [replace(self, path=Path(p)) for p in sorted(glob.glob(pattern))]

    def watched(self) -> list[str]:
        """What the watcher stats: the file, or for a glob its directory (entries added or
        removed) and every file it matches now (edits)."""
        if not self.is_glob:
            return [str(self.path)]
        parts = Path(str(self.path)).parts
        star = next(i for i, part in enumerate(parts) if "*" in part)
        return [str(Path(*parts[:star]))] + [str(loc.path) for loc in self.expand()]


def app_support_dirs(home: Path, appdata: str | None = None) -> list[Path]:
    """Every OS's per-user application directory under this home (the current OS's first), so
    tests need no particular OS."""
    mac = home / "Library" / "Application Support"
    linux = home / ".config"
    windows = Path(appdata) if appdata else home / "AppData" / "Roaming"
    return {"darwin": [mac, linux, windows], "win32": [windows, mac, linux]}.get(sys.platform, [linux, mac, windows])


def _paths(template: str, home: Path, project: Path | None, appdata: str | None, system: Path,
           env: Mapping[str, str]) -> list[Path]:
    if template.startswith("{project}"):
        return [] if project is None else [project / template[len("{project}/"):]]
    if template.startswith("~/"):
        return [home / template[2:]]
    if template.startswith("{system}/"):
        return [system / template[len("{system}/"):]]
    if template.startswith("{codex_home}/"):
        codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        return [codex_home / template[len("{codex_home}/"):]]
    if template.startswith("{appsupport}/"):
        return [d / template[len("{appsupport}/"):] for d in app_support_dirs(home, appdata)]
    if template.startswith("{vscode}/"):
        return [d / family / template[len("{vscode}/"):]
                for d in app_support_dirs(home, appdata) for family in VSCODE_FAMILY]
    raise ValueError(f"unknown path template {template!r}")


def locations(home: str | os.PathLike, project_root: str | os.PathLike | None, appdata: str | None = None, *,
              system_root: str | os.PathLike = "/", env: Mapping[str, str] | None = None) -> list[Location]:
    """All candidate files of every client, existing or not (the watcher wants both)."""
    home, system = Path(home), Path(system_root)
    proj = Path(project_root) if project_root else None
    env = os.environ if env is None else env
    current = str(proj) if proj is not None else None
    out = []
    for client in CLIENTS:
        for f in client.files:
            for path in _paths(f.path, home, proj, appdata, system, env):
                out.append(Location(client.name, path, f.scope, f.shape, f.fmt, client.dialect, client.url_default,
                                    project=current if f.scope == "project" else None,
                                    current=current if f.shape == "claude_json" else None))
    return out


def watched_paths(locs: Iterable[Location]) -> list[str]:
    """Every path the watcher stats for these locations, now (globs re-expanded on each call)."""
    return list(dict.fromkeys(p for loc in locs for p in loc.watched()))


def parse_file(loc: Location, data: bytes) -> Any:
    return formats.parse(loc.path, data, loc.fmt)


@dataclass(frozen=True, slots=True)
class Entry:
    """One server definition found in a file, resolved: its config (None when skipped), the
    variables still unresolved, whether its client has it disabled, or why it was skipped."""

    name: str
    keypath: str
    config: ServerConfig | None
    tags: frozenset = frozenset()
    needs: tuple[str, ...] = ()
    disabled: bool = False
    skipped: str | None = None


def entries(loc: Location, doc: Any, *, home: str = "", env: Mapping[str, str] | None = None) -> Iterator[Entry]:
    """The server definitions in one parsed file, in file order, each resolved or skipped."""
    if not isinstance(doc, dict):
        raise SourceError(f"{loc.path}: top level is not an object; skipped")
    env = os.environ if env is None else env
    shape_ctx = ShapeContext(loc.url_default, loc.current, env.get)
    base = frozenset({loc.provider, f"scope:{loc.scope}"})
    for found in SHAPES[loc.shape](doc, shape_ctx):
        tags = frozenset({loc.provider, "scope:local", f"project:{found.project}"}) if found.local else base
        where = f"{loc.path}: {found.keypath}"
        if found.skipped:
            yield Entry(found.name, found.keypath, None, tags, disabled=found.disabled, skipped=found.skipped)
            continue
        project = found.project or loc.project
        ctx = Context(env, home=home, project=project, file_dir=str(loc.path.parent))
        spec = expand(found.spec, loc.dialect, ctx)
        try:
            spec = _with_env_file(spec, loc.path.parent)
            cfg = spec_to_config(spec, where, project=project)
        except ValueError as exc:
            yield Entry(found.name, found.keypath, None, tags, disabled=found.disabled, skipped=str(exc))
            continue
        needs = tuple(dict.fromkeys((*found.needs, *ctx.unresolved)))
        yield Entry(found.name, found.keypath, cfg, tags, needs, found.disabled)


def _with_env_file(spec: dict, base: Path) -> dict:
    """`envFile` read relative to the file that names it; the entry's own `env` wins."""
    name = spec.pop("env_file", None)
    if not name or spec.get("transport") != "stdio":
        return spec
    path = Path(os.path.expanduser(name))
    path = path if path.is_absolute() else base / path
    try:
        loaded = read_env_file(path)
    except OSError as exc:
        raise ValueError(f"envFile {path}: cannot read ({exc.strerror or exc})") from None
    own = spec.get("env")
    return {**spec, "env": {**loaded, **own} if isinstance(own, dict) else own or loaded}


def claude_approvals(loc: Location, data: Any) -> ClaudeApprovals:
    """The approval keys of a file the *user* controls: ~/.claude.json's entry for this project
    (written when the user answered Claude Code's prompt) or ~/.claude/settings.json.
    Files inside the project are not asked: a cloned repository cannot approve itself."""
    if loc.provider != "claude_code" or loc.scope != "user" or not isinstance(data, dict):
        return ClaudeApprovals()
    body = current_project_entry(data, loc.current)[1] if loc.shape == "claude_json" else data
    if not isinstance(body, dict):
        return ClaudeApprovals()
    return ClaudeApprovals(_names(body.get("enabledMcpjsonServers")), _names(body.get("disabledMcpjsonServers")),
                           body.get("enableAllProjectMcpServers") is True)


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


# ---------------------------------------------------------------- entry → config

def spec_to_item(spec: dict) -> dict:
    """A common spec (see shapes) in troupe's own server shape."""
    return {"name": PLACEHOLDER, "transport": transport_item(spec)}


def spec_to_config(spec: dict, where: str, *, project: str | None = None) -> ServerConfig:
    """Validate one entry; ValueError says what is wrong (never a value: it may be a secret)."""
    item = spec_to_item(spec)
    stdio = item["transport"].get("stdio")
    if stdio is not None and project and not stdio.get("work_dir"):
        stdio["work_dir"] = project  # clients run a project's servers in the project
    try:
        return from_data({"servers": [item]}, file=where).servers[0]
    except ConfigError as exc:
        # "file:line: servers[0].key: message" → "key: message"; the file is named once
        problems = "; ".join(p.split(": ", 1)[-1].replace("servers[0].", "") for p in exc.problems)
        raise ValueError(f"{where}: {problems}") from None


def entry_to_config(name: str, spec: Any, file: str, *, project: str | None = None,
                    home: str | None = None) -> ServerConfig:
    """Validate one Claude-style entry (a registration, a test); ValueError names what is wrong."""
    found = shapes.mcp_servers({"mcpServers": {name: spec}}, ShapeContext(HTTP))
    entry = next(found)
    if entry.skipped:
        raise ValueError(f"{file}: {name}: {entry.skipped}")
    cfg = spec_to_config(entry.spec, f"{file}: {name}", project=project)
    return replace(cfg, enabled=False) if entry.disabled else cfg
