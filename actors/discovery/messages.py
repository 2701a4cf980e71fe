"""Discovery and health messages: engine commands and replies, provider and checker protocol."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import pykka
from loguru import logger

from actors.settings.config import ServerConfig


# ---------------------------------------------------------------- values

@dataclass(frozen=True, slots=True)
class ServiceRecord:
    """One server as one source describes it, before merging."""

    provider: str  # a client of discovery.clients (claude_code, cursor, …), path or registered
    file: str  # the config file, the binary's path, or "store" for a registration
    name: str  # the name that source used (a config key, a binary's name)
    identity: str  # see identity.identity_of
    confidence: float  # which record's connection details win in a merge
    config: ServerConfig  # connection details; its name is a placeholder until the engine names it
    tags: frozenset = frozenset()
    auto_connect: bool = True  # this source's auto-connect policy

    def __repr__(self) -> str:  # the identity is a whole launch line: it may carry a secret argument
        from actors.discovery.identity import redact_identity
        return (f"ServiceRecord(provider={self.provider!r}, file={self.file!r}, name={self.name!r}, "
                f"identity={redact_identity(self.identity)!r})")


@dataclass(frozen=True, slots=True)
class FileReport:
    """What one client file held: the entries used, and those skipped with the reason (for
    `troupe discover`); names and reasons only, never values."""

    path: str
    found: tuple = ()  # entry names, in file order
    skipped: tuple = ()  # (entry name, reason)
    problem: str | None = None  # the whole file could not be used

    def to_json(self) -> dict:
        return {"path": self.path, "found": list(self.found),
                "skipped": [{"name": n, "reason": r} for n, r in self.skipped], "problem": self.problem}


@dataclass(frozen=True, slots=True)
class ProviderResult:
    """What one provider found in one scan; errors are one line each, never file contents."""

    provider: str
    records: tuple = ()
    errors: tuple = ()
    files: tuple = ()  # files that existed and were read
    duration_s: float = 0.0
    reports: tuple = ()  # FileReport per file read


@dataclass(frozen=True, slots=True)
class DiscoveryReport:
    """Reply to RunDiscovery: the merged services after the cycle, and how it went."""

    services: tuple  # service summary dicts (see DiscoveryEngine.summary), sorted by name
    per_source: Mapping[str, int]  # provider → records found
    errors: tuple  # "provider: problem" lines
    duration_s: float
    started_at: float
    finished_at: float = field(default_factory=time.time)
    files: tuple = ()  # (provider, FileReport) for every client file read, in provider order

    def to_json(self) -> dict:
        clients: dict[str, list] = {}
        for provider, report in self.files:
            clients.setdefault(provider, []).append(report.to_json())
        return {"services": list(self.services), "per_source": dict(self.per_source),
                "errors": list(self.errors), "duration_s": round(self.duration_s, 3),
                "started_at": self.started_at, "finished_at": self.finished_at, "clients": clients}


# ---------------------------------------------------------------- engine commands

@dataclass(frozen=True, slots=True)
class RunDiscovery:
    """Asked of the DiscoveryEngine (Runtime, CLI): run a cycle now, or after the running one.
    Reply: DiscoveryReport."""

    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class RegisterServer:
    """Asked of the DiscoveryEngine by Runtime: register a server passively (top confidence,
    persisted, kept by later cycles).

    entry: a Claude-style entry plus "name": {"name", "command", "args", "env", "cwd"}
    or {"name", "url", "type", "headers"}; optional "tags" (list of strings).
    Reply: the registered service's summary dict, or ValueError naming the problem.
    """

    entry: Mapping[str, Any]
    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class UnregisterServer:
    """Asked of the DiscoveryEngine by Runtime: remove a registration. Reply: True if it was
    registered, False otherwise."""

    name: str
    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class ListServices:
    """Asked of the DiscoveryEngine. Reply: tuple of service summary dicts (never env or header
    values), sorted by name."""

    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class GetDiscoveryStatus:
    """Asked of the DiscoveryEngine by Runtime.status. Reply: dict for the status report (last
    run, duration, counts, errors, health)."""

    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class ServicesChanged:
    """Told by the engine to its owner after a change: configs to start, restart, stop.

    Each ServerConfig's `source` says where it came from ("discovery:cursor") and its
    `auto_start` carries the auto-connect policy.
    """

    added: tuple = ()  # ServerConfig
    updated: tuple = ()  # ServerConfig
    removed: tuple = ()  # names


# ---------------------------------------------------------------- provider protocol

@dataclass(frozen=True, slots=True)
class Discover:
    """Told by the DiscoveryEngine to a provider actor. Reply: ProviderResult (a scan in flight is joined)."""

    reply: pykka.ThreadingFuture


# ---------------------------------------------------------------- health checker

@dataclass(frozen=True, slots=True)
class CheckHealth:
    """Asked of the HealthChecker (directly, or through the DiscoveryEngine, which forwards it):
    probe one service (name) or all (None) now.

    Reply: {name: {"healthy": bool|None, "detail": str, "checked_at": float|None}};
    LookupError for an unknown name.
    """

    name: str | None
    reply: pykka.ThreadingFuture


@dataclass(frozen=True, slots=True)
class SetServices:
    """The services to watch (told by the engine after each cycle); others are forgotten."""

    configs: tuple  # ServerConfig


@dataclass(frozen=True, slots=True)
class GetHealth:
    """Asked of the HealthChecker (directly or through the DiscoveryEngine). Reply: the last known
    health of every service, same shape as CheckHealth's."""

    reply: pykka.ThreadingFuture


def resolve(future: pykka.ThreadingFuture, value: Any) -> None:
    """Complete a reply future once; a second completion is a bug we log, not a crash."""
    try:
        future.set(value)
    except Exception:  # queue.Full: already completed
        logger.warning("discovery: reply future completed twice")


def fail(future: pykka.ThreadingFuture, exc: BaseException) -> None:
    try:
        future.set_exception((type(exc), exc, exc.__traceback__))
    except Exception:
        logger.warning("discovery: reply future completed twice")
