"""FileProvider: one MCP client's config files (user, project and managed scope) → records."""
from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

import gevent

from actors.discovery.identity import identity_of, which_on
from actors.discovery.messages import FileReport, ProviderResult, ServiceRecord
from actors.discovery.providers.base import ProviderActor
from actors.discovery.sources import (
    ClaudeApprovals,
    Entry,
    Location,
    SourceError,
    claude_approvals,
    entries,
    parse_file,
    read_limited,
)


def load(loc: Location, max_bytes: int) -> tuple[Any, str | None]:
    """(data, None) or (None, problem). Runs in a worker thread, so a big file does not stall
    the hub; problems come back as values because the pool would print raised ones."""
    try:
        return parse_file(loc, read_limited(loc.path, max_bytes)), None
    except SourceError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"{loc.path}: cannot read ({exc.strerror or exc})"


class FileProvider(ProviderActor):
    """Reads every existing location of one client; a broken file is reported and skipped.

    A file that breaks after it once parsed (an editor mid-save) keeps its last good
    records, so its servers are not stopped and started again around the edit. Entries
    the client has disabled, or whose variables cannot be resolved, are still records (listed,
    never started); entries that cannot be used at all are reported per file with the reason.
    """

    def __init__(self, provider: str, locations: tuple, *, home: str, search_path: str,
                 max_file_bytes: int, max_claude_json_bytes: int, auto_connect: bool,
                 env: dict | None = None) -> None:
        super().__init__()
        self.provider = provider
        self._locations = tuple(loc for loc in locations if loc.provider == provider)
        self._home = home
        self._env = dict(os.environ if env is None else env)
        self._which = which_on(search_path)
        self._max = max_file_bytes
        self._max_claude_json = max(max_file_bytes, max_claude_json_bytes)
        self._auto = auto_connect
        self._last_good: dict[str, tuple] = {}

    def scan(self) -> ProviderResult:
        records, errors, files, reports, seen = [], [], [], [], set()
        approvals = ClaudeApprovals()
        present = set()
        for loc in (concrete for pattern in self._locations for concrete in pattern.expand()):
            key = str(loc.path)
            real = os.path.realpath(loc.path)
            if real in seen or not os.path.isfile(loc.path):
                continue
            seen.add(real)
            present.add(key)
            limit = self._max_claude_json if loc.shape == "claude_json" else self._max
            data, problem = gevent.get_hub().threadpool.apply(load, (loc, limit))
            if problem is None:
                found, problems, report = self._records(loc, data)
                self._last_good[key] = found
                approvals = approvals.merged(claude_approvals(loc, data))
            else:
                found, problems = self._last_good.get(key, ()), [problem]
                if found:
                    problems.append(f"{key}: kept {len(found)} server(s) from its last good version")
                report = FileReport(key, tuple(r.name for r in found), problem=problem)
            files.append(key)
            reports.append(report)
            records.extend(found)
            errors.extend(problems)
        for gone in set(self._last_good) - present:  # deleted (or no longer matched): forget it
            del self._last_good[gone]
        records = [self._with_client_verdict(r, approvals) for r in records]
        return ProviderResult(self.provider, tuple(records), tuple(errors), tuple(files), reports=tuple(reports))

    def _with_client_verdict(self, record: ServiceRecord, approvals: ClaudeApprovals) -> ServiceRecord:
        """A project .mcp.json server Claude Code's user approved or denied carries that verdict."""
        if not record.file.endswith(".mcp.json") or "scope:project" not in record.tags:
            return record
        verdict = approvals.verdict(record.name)
        if verdict is None:
            return record
        return replace(record, config=replace(record.config, preapproved=verdict))

    def _records(self, loc: Location, data: Any) -> tuple[tuple, list, FileReport]:
        found, problems, skipped = [], [], []
        try:
            items = list(entries(loc, data, home=self._home, env=self._env))
        except SourceError as exc:
            return (), [str(exc)], FileReport(str(loc.path), problem=str(exc))
        for entry in items:
            if entry.config is None:
                skipped.append((entry.name, entry.skipped or "unusable"))
                problems.append(f"{loc.path}: {entry.keypath}: {entry.skipped}" if entry.skipped
                                and not entry.skipped.startswith(str(loc.path)) else str(entry.skipped))
                continue
            try:
                identity = identity_of(entry.config, self._which)
            except ValueError as exc:
                skipped.append((entry.name, str(exc)))
                problems.append(str(exc))
                continue
            found.append(self._record(loc, entry, identity))
        return tuple(found), problems, FileReport(str(loc.path), tuple(r.name for r in found), tuple(skipped))

    def _record(self, loc: Location, entry: Entry, identity: str) -> ServiceRecord:
        assert entry.config is not None
        config = entry.config
        if entry.disabled:
            config = replace(config, enabled=False)
        if entry.needs:
            config = replace(config, needs_input=entry.needs)
        tags = entry.tags | {"client-config"}
        if entry.disabled:
            tags |= {"disabled"}
        return ServiceRecord(provider=self.provider, file=str(loc.path), name=entry.name, identity=identity,
                             confidence=loc.confidence, config=config, tags=tags, auto_connect=self._auto)
