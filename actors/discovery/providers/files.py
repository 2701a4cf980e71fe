"""FileProvider: one MCP client's config files (user and project level) → records."""
from __future__ import annotations

import os
from typing import Any

import gevent

from actors.discovery.identity import identity_of, which_on
from actors.discovery.messages import ProviderResult, ServiceRecord
from dataclasses import replace

from actors.discovery.sources import (
    VSCODE_SERVERS,
    ClaudeApprovals,
    Location,
    SourceError,
    claude_approvals,
    entries,
    entry_to_config,
    parse_json,
    read_limited,
)
from actors.discovery.providers.base import ProviderActor


def load(path, max_bytes: int) -> tuple[Any, str | None]:
    """(data, None) or (None, problem). Runs in a worker thread, so a big file does not stall
    the hub; problems come back as values because the pool would print raised ones."""
    try:
        return parse_json(path, read_limited(path, max_bytes)), None
    except SourceError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{path}: cannot read ({exc.strerror or exc})"


class FileProvider(ProviderActor):
    """Reads every existing location of one provider; a broken file is reported and skipped.

    A file that breaks after it once parsed (an editor mid-save) keeps its last good
    records, so its servers are not stopped and started again around the edit.
    """

    def __init__(self, provider: str, locations: tuple, *, home: str, search_path: str,
                 max_file_bytes: int, max_claude_json_bytes: int, auto_connect: bool) -> None:
        super().__init__()
        self.provider = provider
        self._locations = tuple(loc for loc in locations if loc.provider == provider)
        self._home = home
        self._which = which_on(search_path)
        self._max = max_file_bytes
        self._max_claude_json = max(max_file_bytes, max_claude_json_bytes)
        self._auto = auto_connect
        self._last_good: dict[str, tuple] = {}

    def scan(self) -> ProviderResult:
        records, errors, files, seen = [], [], [], set()
        approvals = ClaudeApprovals()
        for loc in self._locations:
            key = str(loc.path)
            real = os.path.realpath(loc.path)
            if real in seen or not os.path.isfile(loc.path):
                if not os.path.exists(loc.path):
                    self._last_good.pop(key, None)
                continue
            seen.add(real)
            limit = self._max_claude_json if loc.fmt == "claude_json" else self._max
            data, problem = gevent.get_hub().threadpool.apply(load, (loc.path, limit))
            if problem is None:
                found, problems = self._records(loc, data)
                self._last_good[key] = found
                approvals = approvals.merged(claude_approvals(loc, data))
            else:
                found, problems = self._last_good.get(key, ()), [problem]
                if found:
                    problems.append(f"{key}: kept {len(found)} server(s) from its last good version")
            files.append(key)
            records.extend(found)
            errors.extend(problems)
        records = [self._with_client_verdict(r, approvals) for r in records]
        return ProviderResult(self.provider, tuple(records), tuple(errors), tuple(files))

    def _with_client_verdict(self, record: ServiceRecord, approvals: ClaudeApprovals) -> ServiceRecord:
        """A project .mcp.json server Claude Code's user approved or denied carries that verdict."""
        if not record.file.endswith(".mcp.json") or "scope:project" not in record.tags:
            return record
        verdict = approvals.verdict(record.name)
        if verdict is None:
            return record
        return replace(record, config=replace(record.config, preapproved=verdict))

    def _records(self, loc: Location, data: Any) -> tuple[tuple, list]:
        found, problems = [], []
        try:
            items = list(entries(loc, data))
        except SourceError as exc:
            return (), [str(exc)]
        for entry in items:
            try:
                cfg = entry_to_config(entry.path, entry.spec, str(loc.path), project=entry.project,
                                      home=self._home, vscode=loc.fmt == VSCODE_SERVERS)
                identity = identity_of(cfg, self._which)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            found.append(ServiceRecord(
                provider=self.provider, file=str(loc.path), name=entry.name, identity=identity,
                confidence=loc.confidence, config=cfg, tags=entry.tags | {"client-config"},
                auto_connect=self._auto))
        return tuple(found), problems
