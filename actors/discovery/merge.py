"""Merging records into services by identity, naming them, summaries and change sets."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from actors.settings.config import ServerConfig
from actors.redact import redact_args, redact_url
from actors.discovery.identity import redact_identity, sanitise_name, unique_name
from actors.discovery.messages import ServiceRecord
from actors.trust import provenance as trust

# Tie-break between equally confident records, so merges are deterministic.
PROVIDER_ORDER = ("registered", "troupe", "claude_code", "claude_desktop", "cursor", "vscode",
                  "windsurf", "path")
REGISTERED = "registered"
PATH_PROVIDER = "path"
# Most trusted first: the same launch line in a user's own client file needs no approval,
# wherever else it is also listed.
PROVENANCE_ORDER = (trust.USER, trust.PROJECT, trust.REGISTERED, trust.PATH)


def provenance_of(record: ServiceRecord) -> str:
    """Who put this record's server here: the user, a project's files, the PATH probe, a registration."""
    if record.provider == REGISTERED:
        return trust.REGISTERED
    if record.provider == PATH_PROVIDER:
        return trust.PATH
    return trust.PROJECT if "scope:project" in record.tags else trust.USER


def _rank(record: ServiceRecord) -> tuple:
    order = PROVIDER_ORDER.index(record.provider) if record.provider in PROVIDER_ORDER else len(PROVIDER_ORDER)
    return (-record.confidence, order, record.file, record.name)


@dataclass(frozen=True, slots=True)
class Service:
    """Every record of one identity; the first (most confident) supplies the details."""

    identity: str
    records: tuple  # ServiceRecord, best first

    @property
    def best(self) -> ServiceRecord:
        return self.records[0]

    @property
    def confidence(self) -> float:
        return self.best.confidence

    @property
    def registered(self) -> ServiceRecord | None:
        return next((r for r in self.records if r.provider == REGISTERED), None)

    @property
    def tags(self) -> frozenset:
        return frozenset().union(*(r.tags for r in self.records))

    @property
    def auto_connect(self) -> bool:
        # A server some trusted source asks for is connected, even if PATH found it too.
        return any(r.auto_connect for r in self.records)

    @property
    def provenance(self) -> str:
        return min((provenance_of(r) for r in self.records), key=PROVENANCE_ORDER.index)

    @property
    def preapproved(self) -> bool | None:
        """A client's own verdict on this launch line: any denial wins, then any approval."""
        verdicts = {r.config.preapproved for r in self.records}
        return False if False in verdicts else True if True in verdicts else None

    @property
    def enabled(self) -> bool:
        """Disabled only when every client that lists it has it switched off."""
        return any(r.config.enabled for r in self.records)

    def config(self, name: str) -> ServerConfig:
        return replace(self.best.config, name=name, source=f"discovery:{self.best.provider}",
                       auto_start=self.auto_connect, provenance=self.provenance, identity=self.identity,
                       origin_file=self.best.file, preapproved=self.preapproved, enabled=self.enabled)


def merge(records: Iterable[ServiceRecord]) -> list[Service]:
    groups: dict[str, list[ServiceRecord]] = {}
    for record in records:
        groups.setdefault(record.identity, []).append(record)
    return [Service(identity, tuple(sorted(group, key=_rank))) for identity, group in sorted(groups.items())]


def assign_names(services: Iterable[Service], reserved: Iterable[str],
                 previous: Mapping[str, str]) -> dict[str, Service]:
    """name → service. Registered names first, then names kept from the last cycle,
    then the rest by confidence; a clash with a reserved or taken name gets a suffix."""
    taken = set(reserved)
    named: dict[str, Service] = {}
    pending = []
    for svc in services:
        reg = svc.registered
        if reg is not None and reg.name not in taken:
            taken.add(reg.name)
            named[reg.name] = svc
        else:
            pending.append(svc)
    rest = []
    for svc in pending:
        old = previous.get(svc.identity)
        if old is not None and old not in taken:
            taken.add(old)
            named[old] = svc
        else:
            rest.append(svc)
    for svc in sorted(rest, key=lambda s: (_rank(s.best), s.identity)):
        name = unique_name(sanitise_name(svc.best.name), taken)
        taken.add(name)
        named[name] = svc
    return named


def summary(name: str, svc: Service, healthy: bool | None = None) -> dict:
    """What may leave the engine: env and header *names* only, secret args and URL values starred."""
    cfg = svc.best.config
    out = {
        "name": name,
        "identity": redact_identity(svc.identity),
        "sources": [{"provider": r.provider, "file": r.file, "name": r.name, "confidence": r.confidence}
                    for r in svc.records],
        "confidence": svc.confidence,
        "tags": sorted(svc.tags),
        "transport": cfg.transport,
        "healthy": healthy,
        "auto_connect": svc.auto_connect,
        "enabled": svc.enabled,
        "needs_input": list(cfg.needs_input),  # variable names as written, never values
        "registered": svc.registered is not None,
        "provenance": svc.provenance,
        "preapproved": svc.preapproved,
    }
    if cfg.stdio is not None:
        out.update(command=cfg.stdio.command, args=redact_args(cfg.stdio.args), env_names=sorted(cfg.stdio.env),
                   cwd=cfg.stdio.work_dir)
    elif cfg.http is not None:
        out.update(url=redact_url(cfg.http.url), header_names=sorted(cfg.http.headers))
    return out


def _same_launch(a: ServerConfig, b: ServerConfig) -> bool:
    # Only what changes how the server is reached counts; a new source alone is no restart.
    return replace(a, source="") == replace(b, source="")


def diff(old: Mapping[str, Service], new: Mapping[str, Service]) -> tuple[list, list, list, list]:
    """(added, updated, removed, touched): names; updated = launch details changed,
    touched = only sources or tags changed (an event, but nothing to restart)."""
    added = sorted(n for n in new if n not in old)
    removed = sorted(n for n in old if n not in new)
    updated, touched = [], []
    for name in sorted(set(old) & set(new)):
        if not _same_launch(old[name].config(name), new[name].config(name)):
            updated.append(name)
        elif old[name].records != new[name].records:
            touched.append(name)
    return added, updated, removed, touched
