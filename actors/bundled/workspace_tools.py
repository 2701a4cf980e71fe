"""The bundled workspace server's tools: their schemas, the check of a call's arguments against
them, and Workspace, the read-only access to the files under one root that implements them.
The MCP side (JSON-RPC over stdio) is actors.bundled.workspace."""
from __future__ import annotations

import fnmatch
import os
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import cast

MAX_FILE_BYTES = 5 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv"})
# Caps that keep one call from walking a huge tree or pinning the (single) loop.
MAX_SCAN_ENTRIES = 20_000
MAX_SEARCH_BYTES = 200 * 1024 * 1024
MAX_MATCH_CHARS = 300


def _tool(name: str, title: str, description: str, properties: dict, required: tuple = ()) -> dict:
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return {"name": name, "title": title, "description": description, "inputSchema": schema,
            "annotations": {"title": title, "readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}}


_PATH = {"type": "string", "description": "Path relative to the workspace root, e.g. 'src/app.py'."}
TOOLS = [
    _tool("list_files", "List files",
          "List a directory of the workspace. Each line is 'type<TAB>size<TAB>path' where type is "
          "file, dir or link, size is bytes ('-' for directories) and path is relative to the root, "
          "sorted by path. Recursive listings skip .git, node_modules, __pycache__ and .venv.",
          {"path": {**_PATH, "description": "Directory to list, relative to the root.", "default": "."},
           "pattern": {"type": "string", "description": "Glob on the entry name, e.g. '*.py'; "
                       "a pattern containing '/' is matched against the path under 'path'."},
           "recursive": {"type": "boolean", "description": "Descend into subdirectories.", "default": False},
           "limit": {"type": "integer", "minimum": 1, "maximum": 2000, "default": 200,
                     "description": "Maximum number of entries to return."}}),
    _tool("read_file", "Read file",
          "Read a UTF-8 text file of the workspace, optionally a window of lines. Returns the lines "
          "verbatim; when only part of the file is returned a second text block says which lines and "
          "how to continue. Refuses binary files and files over 5 MB.",
          {"path": _PATH,
           "offset": {"type": "integer", "minimum": 1, "default": 1, "description": "First line to return (1-based)."},
           "limit": {"type": "integer", "minimum": 1, "maximum": 100_000, "default": 2000,
                     "description": "Maximum number of lines to return."}}, ("path",)),
    _tool("search_text", "Search text",
          "Search the text files under a path for a string or regular expression, like grep. Each "
          "match is 'path:line: text' (text cut to 300 characters). Skips binary files, files over "
          "5 MB, .git, node_modules, __pycache__ and .venv.",
          {"query": {"type": "string", "minLength": 1,
                     "description": "Text to find (a Python regex if regex is true)."},
           "path": {**_PATH, "description": "File or directory to search, relative to the root.", "default": "."},
           "glob": {"type": "string", "description": "Only search files whose name matches this glob, e.g. '*.py'."},
           "regex": {"type": "boolean", "default": False, "description": "Treat query as a regular expression."},
           "case_sensitive": {"type": "boolean", "default": False, "description": "Match case exactly."},
           "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100,
                     "description": "Maximum number of matching lines to return."}}, ("query",)),
    _tool("file_info", "File info",
          "Describe one path of the workspace as JSON: type (file, directory, other), size in bytes, "
          "modified time (ISO 8601, UTC), and for text files the line count.",
          {"path": _PATH}, ("path",)),
]
SCHEMAS = {t["name"]: t["inputSchema"] for t in TOOLS}


class ToolError(Exception):
    """A failure the model should read and can fix: reported as isError, not a protocol error."""


def log(message: str) -> None:
    print(f"troupe-workspace: {message}", file=sys.stderr, flush=True)


def clean(text: str) -> str:
    # Undecodable file names come back from os as lone surrogates, which orjson refuses to encode.
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def check_args(name: str, args: dict) -> dict:
    """Validate arguments against the tool's own schema (the subset it uses) and fill defaults."""
    schema = SCHEMAS[name]
    props = schema["properties"]
    unknown = sorted(set(args) - set(props))
    if unknown:
        raise ToolError(f"unknown argument(s) {unknown}; {name} accepts {sorted(props)}")
    for key in schema.get("required", ()):
        if key not in args:
            raise ToolError(f"missing required argument '{key}'")
    out = {}
    for key, spec in props.items():
        value = args.get(key, spec.get("default"))
        if value is None:
            out[key] = None
            continue
        kind = spec["type"]
        if kind == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)  # some clients send 5.0 for 5
        ok = {"string": isinstance(value, str), "boolean": isinstance(value, bool),
              "integer": isinstance(value, int) and not isinstance(value, bool)}[kind]
        if not ok:
            raise ToolError(f"argument '{key}' must be a {kind}, got {type(value).__name__}")
        if kind == "integer" and not spec.get("minimum", value) <= value <= spec.get("maximum", value):
            bounds = f"at least {spec['minimum']}" + (f" and at most {spec['maximum']}" if "maximum" in spec else "")
            raise ToolError(f"argument '{key}' must be {bounds}, got {value}")
        if kind == "string" and len(cast(str, value)) < spec.get("minLength", 0):  # ok: it is a str
            raise ToolError(f"argument '{key}' must not be empty")
        out[key] = value
    return out


class Workspace:
    """The files under one root, read-only: resolves every path inside the root (symlinks
    followed first) and implements the tools (list_files, read_file, search_text, file_info)."""

    def __init__(self, root: Path):
        self.root = root

    def resolve(self, rel: str) -> Path:
        """Resolve a user path; symlinks are followed first so none can lead outside the root."""
        try:
            target = (self.root / rel).resolve()  # an absolute rel replaces the root, then gets checked
        except (OSError, RuntimeError, ValueError) as exc:  # loops (RuntimeError before 3.13), NUL bytes
            raise ToolError(f"cannot resolve '{rel}': {exc}") from None
        if target != self.root and self.root not in target.parents:
            raise ToolError(f"path '{rel}' is outside the workspace root; use a path relative to the root")
        return target

    def rel(self, path: Path) -> str:
        return clean(path.relative_to(self.root).as_posix()) if path != self.root else "."

    def existing(self, rel: str) -> Path:
        path = self.resolve(rel)
        if not path.exists():
            raise ToolError(f"'{rel}' not found in the workspace; use list_files or search_text to find it")
        return path

    def walk(self, top: Path, recursive: bool):
        """Yield entries under top in sorted order; never follows directory symlinks out of the tree."""
        if not recursive:
            yield from sorted(top.iterdir())
            return
        for dirpath, dirnames, filenames in os.walk(top, onerror=lambda e: log(f"walk: {e}")):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            base = Path(dirpath)
            for name in sorted(dirnames + filenames):
                yield base / name

    def read_bytes(self, path: Path, rel: str) -> bytes:
        if not path.is_file():
            raise ToolError(f"'{rel}' is not a regular file")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ToolError(f"'{rel}' is {size} bytes, over the {MAX_FILE_BYTES} byte limit")
        data = path.read_bytes()
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            raise ToolError(f"'{rel}' looks like a binary file (NUL bytes); only text files can be read")
        return data

    # -- tools -----------------------------------------------------------------------------
    def list_files(self, path, pattern, recursive, limit):
        top = self.existing(path)
        if not top.is_dir():
            raise ToolError(f"'{path}' is a file, not a directory; use file_info or read_file on it")
        rows, scanned = [], 0
        for entry in self.walk(top, recursive):
            scanned += 1
            if scanned > MAX_SCAN_ENTRIES:
                break
            under = entry.relative_to(top).as_posix()
            if pattern and not fnmatch.fnmatch(under if "/" in pattern else entry.name, pattern):
                continue
            try:
                st = entry.lstat()
            except OSError:
                continue  # vanished between listing and stat
            kind = "link" if entry.is_symlink() else "dir" if entry.is_dir() else "file"
            rows.append(f"{kind}\t{st.st_size if kind == 'file' else '-'}\t{self.rel(entry)}")
        rows.sort(key=lambda r: r.split("\t", 2)[2])
        total = len(rows)
        out = rows[:limit]
        if not out:
            out.append(f"(no entries in '{path}'" + (f" matching '{pattern}')" if pattern else ")"))
        if scanned > MAX_SCAN_ENTRIES:
            out.append(f"[stopped after scanning {MAX_SCAN_ENTRIES} entries; narrow path or pattern]")
        elif total > limit:
            out.append(f"[truncated: showing {limit} of {total} entries; narrow path/pattern or raise limit]")
        return "\n".join(out)

    def read_file(self, path, offset, limit):
        target = self.existing(path)
        lines = _split_lines(self.read_bytes(target, path).decode("utf-8", "replace"))
        chunk = lines[offset - 1:offset - 1 + limit]
        if not chunk and lines:
            return [f"offset {offset} is past the end of '{path}', which has {len(lines)} lines"]
        content = ["".join(chunk)]
        if len(chunk) < len(lines):
            last = offset + len(chunk) - 1
            more = f"; call again with offset={last + 1} to continue" if last < len(lines) else ""
            content.append(f"[showing lines {offset}-{last} of {len(lines)}{more}]")
        return content

    def search_text(self, query, path, glob, regex, case_sensitive, limit):
        top = self.existing(path)
        flags = 0 if case_sensitive else re.IGNORECASE
        try:
            pattern = re.compile(query if regex else re.escape(query), flags)
        except re.error as exc:
            raise ToolError(f"invalid regular expression: {exc}") from None
        files = [top] if top.is_file() else (p for p in self.walk(top, True) if p.is_file())
        matches, scanned, budget, stopped = [], 0, MAX_SEARCH_BYTES, ""
        for file in files:
            if glob and not fnmatch.fnmatch(file.name, glob):
                continue
            if scanned >= MAX_SCAN_ENTRIES or budget <= 0:
                stopped = f"[stopped after scanning {scanned} files; narrow path or glob]"
                break
            scanned += 1
            text = self._searchable(file)
            if text is None:
                continue
            budget -= len(text)
            if not regex and not pattern.search(text):
                continue  # a literal cannot span lines, so one whole-file miss skips the line loop
            for number, line in enumerate(_split_lines(text), 1):
                if pattern.search(line):
                    matches.append(f"{self.rel(file)}:{number}: {line.rstrip(chr(13) + chr(10))[:MAX_MATCH_CHARS]}")
                    if len(matches) >= limit:
                        break
            if len(matches) >= limit:
                stopped = f"[stopped at limit={limit} matches; raise limit or narrow the search]"
                break
        if not matches:
            matches.append(f"no matches for {query!r} in {scanned} file(s) under '{path}'")
        return "\n".join(matches + ([stopped] if stopped else []))

    def _searchable(self, file: Path) -> str | None:
        """Text of a file worth searching, or None for links out of the root, binaries and giants."""
        try:
            real = file.resolve()
            if self.root not in real.parents or real.stat().st_size > MAX_FILE_BYTES:
                return None
            data = real.read_bytes()
        except OSError:
            return None
        return None if b"\x00" in data[:BINARY_SNIFF_BYTES] else data.decode("utf-8", "replace")

    def file_info(self, path):
        target = self.existing(path)
        st = target.stat()
        kind = "file" if target.is_file() else "directory" if target.is_dir() else "other"
        info = {"path": self.rel(target), "type": kind, "size": st.st_size,
                "modified": datetime.fromtimestamp(st.st_mtime, timezone.utc).isoformat()}
        if kind == "file":
            with target.open("rb") as f:
                info["binary"] = b"\x00" in f.read(BINARY_SNIFF_BYTES)
                if not info["binary"] and st.st_size <= MAX_FILE_BYTES:
                    f.seek(0)
                    data = f.read()
                    # Same rule as _split_lines: a last line without "\n" still counts.
                    info["lines"] = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        elif kind == "directory":
            info["entries"] = sum(1 for _ in target.iterdir())
        return info


def _split_lines(text: str) -> list[str]:
    # Only "\n" ends a line, unlike str.splitlines, so numbers agree with grep and editors.
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])

