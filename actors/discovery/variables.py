"""Each MCP client's variable dialect, resolved the way that client would, from troupe's environment.

A value that still holds a variable nobody can fill (`${input:…}` that VS Code would prompt
for, Continue's `${{ secrets.… }}`, an unset env var with no default) is reported, never
passed on as literal text: the server waits in state `needs-input` instead.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

# ${env:X} (Cursor, VS Code, Windsurf, Roo, LM Studio), ${X} and ${X:-default} (Claude Code),
# $X (Gemini CLI), {env:X} (opencode), ${{ secrets.X }} (Continue), and the editors' own names.
_ENV_COLON = r"\$\{env:(?P<env>[A-Za-z_][A-Za-z0-9_]*)\}"
_INPUT = r"\$\{input:(?P<input>[^}]*)\}"
_BRACED = r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}"
_BARE = r"\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
_OPENCODE = r"\{env:(?P<oc>[A-Za-z_][A-Za-z0-9_]*)\}"
_OPENCODE_FILE = r"\{file:(?P<ocfile>[^}]*)\}"
_CONTINUE = r"\$\{\{\s*(?P<cont>[^}]*?)\s*\}\}"

# Editor variables: named, resolved from the context (workspace folder, home, …).
_EDITOR = r"\$\{(?P<editor>workspaceFolder|workspaceFolderBasename|userHome|pathSeparator|/|extensionPath)\}"


@dataclass(frozen=True, slots=True)
class Dialect:
    """One client's variable syntax: the regex of what it expands, in priority order."""

    name: str
    pattern: re.Pattern


def _dialect(name: str, *parts: str) -> Dialect:
    return Dialect(name, re.compile("|".join(parts)))


DIALECTS = {
    "none": _dialect("none", r"(?!x)x"),  # Zed, Goose, Codex: values are taken as written
    # Claude Code (and clients that copied its shape): ${VAR} and ${VAR:-default}
    "claude": _dialect("claude", _BRACED),
    # VS Code: ${env:X}, ${input:id} (a prompt troupe cannot show), editor variables
    "vscode": _dialect("vscode", _ENV_COLON, _INPUT, _EDITOR),
    # Cursor, Windsurf, Roo Code, LM Studio: ${env:X} and the editor variables
    "cursor": _dialect("cursor", _ENV_COLON, _EDITOR),
    # Gemini CLI: $VAR and ${VAR}, ${extensionPath} in extensions
    "gemini": _dialect("gemini", _EDITOR, _BRACED, _BARE),
    # opencode: {env:X}; {file:path} reads a file, which troupe does not do for a discovered entry
    "opencode": _dialect("opencode", _OPENCODE, _OPENCODE_FILE),
    # Continue: ${{ secrets.X }} / ${{ inputs.X }} live in Continue's hub, not in the environment
    "continue": _dialect("continue", _CONTINUE),
}


@dataclass(slots=True)
class Context:
    """What a file's variables may refer to: troupe's environment, the project and the home
    directory, the file's own directory (for `${extensionPath}`). Collects what it could not fill."""

    env: Mapping[str, str]
    home: str = ""
    project: str | None = None
    file_dir: str = ""
    unresolved: list[str] = field(default_factory=list)

    def _missing(self, text: str) -> str:
        if text not in self.unresolved:
            self.unresolved.append(text)
        return text  # kept as written: the entry is never started while anything is unresolved


def _replacer(ctx: Context) -> Callable[[re.Match], str]:
    def replace(m: re.Match) -> str:
        groups = m.groupdict()
        text = m.group(0)
        for key in ("env", "braced", "bare", "oc"):
            var = groups.get(key)
            if var:
                if var in ctx.env:
                    return ctx.env[var]
                if key == "braced" and groups.get("default") is not None:
                    return groups["default"]
                return ctx._missing(text)
        editor = groups.get("editor")
        if editor:
            value = {"workspaceFolder": ctx.project, "userHome": ctx.home, "pathSeparator": os.sep, "/": os.sep,
                     "extensionPath": ctx.file_dir,
                     "workspaceFolderBasename": Path(ctx.project).name if ctx.project else None}[editor]
            return value if value else ctx._missing(text)
        return ctx._missing(text)  # ${input:…}, ${{ secrets.… }}, {file:…}

    return replace


def expand(value: Any, dialect: str, ctx: Context) -> Any:
    """value with every variable of the dialect resolved; what cannot be is left and recorded."""
    d = DIALECTS[dialect]
    sub = _replacer(ctx)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return d.pattern.sub(sub, v)
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        return v

    return walk(value)


_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def read_env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines (dotenv): comments and blank lines skipped, one pair of quotes removed."""
    out: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8-sig").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _ENV_LINE.match(line)
        if not m:
            continue
        key, value = m.groups()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        out[key] = value
    return out
