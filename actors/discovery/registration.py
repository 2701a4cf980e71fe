"""Passive registrations: validating an entry and turning it into a top-confidence record."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from actors.settings.config import SERVER_NAME
from actors.discovery.identity import Which, identity_of
from actors.discovery.merge import REGISTERED
from actors.discovery.messages import ServiceRecord
from actors.discovery.sources import CONFIDENCE_REGISTERED, entry_to_config

# What a registration entry may hold (Claude-style, plus name and tags).
ENTRY_KEYS = frozenset({"name", "command", "args", "env", "cwd", "url", "serverUrl", "type", "transport",
                        "headers", "tags", "disabled"})


def _plain(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def validate(entry: Any, reserved: frozenset) -> tuple[str, dict]:
    """(name, the entry as plain JSON data without its name); ValueError says what is wrong."""
    if not isinstance(entry, Mapping):
        raise ValueError("a registration is a mapping with name and command or url")
    name = entry.get("name")
    if not isinstance(name, str) or not SERVER_NAME.match(name):
        raise ValueError(f"name {name!r} must match {SERVER_NAME.pattern}")
    if name in reserved:
        raise ValueError(f"name {name!r} is used by a server in the main config")
    return name, {k: _plain(v) for k, v in entry.items() if k != "name"}


def record(name: str, entry: Mapping, *, store_label: str, home: str, which: Which | None,
           auto_connect: bool) -> ServiceRecord:
    """The stored entry as a record; ValueError for one that does not validate."""
    unknown = set(entry) - ENTRY_KEYS
    if unknown:
        raise ValueError(f"{name}: unknown key(s) {', '.join(sorted(unknown))} "
                         f"(allowed: {', '.join(sorted(ENTRY_KEYS))})")
    tags = entry.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError(f"{name}: tags must be a list of strings")
    spec = {k: v for k, v in entry.items() if k not in ("name", "tags")}
    cfg = entry_to_config(name, spec, store_label, home=home)
    return ServiceRecord(provider=REGISTERED, file=store_label, name=name, identity=identity_of(cfg, which),
                         confidence=CONFIDENCE_REGISTERED, config=cfg, tags=frozenset({REGISTERED, *tags}),
                         auto_connect=auto_connect)
