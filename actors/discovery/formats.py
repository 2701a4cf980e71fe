"""Reading a client's config file: bounded in size, then JSON, JSONC, TOML or YAML by well-kept parsers.

Every failure is a `SourceError` of one line naming the file (and line, where the parser
says), never the file's contents: a broken file may hold secrets.
"""
from __future__ import annotations

# Decoding runs in the hub's worker threads, and an import there can deadlock against
# gevent (several workers first-importing a codec at once hung one provider's scan for ever):
# every module a parse needs is imported here, before any worker runs.
import encodings.utf_8_sig  # noqa: F401  (bytes.decode("utf-8-sig") imports it lazily)
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import json5
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

FORMATS = ("json", "jsonc", "toml", "yaml")


class SourceError(Exception):
    """A file that cannot be used: one line, naming the file, never its contents."""


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


def _text(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); skipped") from None


def parse_json(path: Path, data: bytes) -> Any:
    """Strict JSON first (fast, and ~/.claude.json can be big); then JSONC, as VS Code, Cursor, Zed
    and opencode accept comments and trailing commas."""
    text = _text(path, data)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        strict_error = exc
    try:
        return json5.loads(text)
    except ValueError as exc:
        # json5 says "<string>:LINE Unexpected "c" at column COL": keep the place, not the character
        m = re.match(r"<string>:(\d+) .* at column (\d+)", str(exc))
        line, col = (m.group(1), m.group(2)) if m else (strict_error.lineno, strict_error.colno)
        raise SourceError(f"{path}:{line}:{col}: not valid JSON or JSONC; skipped") from None


def parse_toml(path: Path, data: bytes) -> Any:
    try:
        return tomllib.loads(_text(path, data))
    except tomllib.TOMLDecodeError as exc:
        # the message ends with "(at line L, column C)" and quotes no value
        raise SourceError(f"{path}: not valid TOML ({exc}); skipped") from None


def parse_yaml(path: Path, data: bytes) -> Any:
    try:
        return yaml.safe_load(_text(path, data))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise SourceError(f"{path}{where}: not valid YAML ({problem}); skipped") from None


def parse(path: Path, data: bytes, fmt: str) -> Any:
    """The parsed document of one file in its client's format."""
    if fmt == "toml":
        return parse_toml(path, data)
    if fmt == "yaml":
        return parse_yaml(path, data)
    return parse_json(path, data)
