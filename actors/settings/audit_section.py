"""The config's `audit:` section: where troupe writes its audit trail and how it rotates the file.
Checked with the config loader's checker, so every problem names its file, line and key."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from actors.settings.config import _Checker

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # one file's size before it is rotated
DEFAULT_KEEP = 5  # rotated files kept beside the live one (file.1 … file.5)
MIN_MAX_BYTES = 1024  # below this every few lines would rotate: a typo, not a wish


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """The `audit:` section: `file` (absolute; relative paths are the config file's), the size at
    which it is rotated (`max_bytes`) and how many rotated files are kept (`keep`)."""

    file: str
    max_bytes: int = DEFAULT_MAX_BYTES
    keep: int = DEFAULT_KEEP


def parse(data: Any, check: _Checker, expand: Callable[[str], str], base: Path) -> AuditConfig | None:
    """`audit: {file: PATH, max_bytes: N, keep: N}` checked; None when absent (no audit trail)."""
    if data is None:
        return None
    if not isinstance(data, dict):
        check.fail("audit", "must be a mapping like {file: audit.jsonl, max_bytes: 10485760, keep: 5}")
        return None
    check.unknown_keys(data, {"file", "max_bytes", "keep"}, "audit")
    file = check.typed(data, "file", "audit", str, None)
    if not file:
        check.fail("audit.file", "is required: the file the audit trail is written to")
        return None
    max_bytes = check.typed(data, "max_bytes", "audit", int, DEFAULT_MAX_BYTES)
    if max_bytes < MIN_MAX_BYTES:
        check.fail("audit.max_bytes", f"must be at least {MIN_MAX_BYTES} bytes, got {max_bytes!r}")
        max_bytes = DEFAULT_MAX_BYTES
    keep = check.typed(data, "keep", "audit", int, DEFAULT_KEEP)
    if keep < 1:
        check.fail("audit.keep", f"must be at least 1 (rotated files kept), got {keep!r}")
        keep = DEFAULT_KEEP
    path = str((base / os.path.expanduser(expand(file))).resolve())
    return AuditConfig(path, max_bytes, keep)
