"""How the Runtime builds the Observer (with the audit writer as its listener when the config has
`audit.file`), reads the writer's figures for /status, and stops it."""
from __future__ import annotations

from typing import Callable

from actors.ops.audit_file import AuditFile
from actors.ops.observer import Observer
from actors.ops.writer import AuditWriter


def start(config, instance: Callable[[], str | None],
          listeners: tuple = ()) -> tuple[Observer | None, AuditWriter | None]:
    """(the Observer, the AuditWriter) for `config`: the audit writer and `listeners` (the
    dashboard's last failures) hear every record; (None, None) with neither, so the call path's one
    check is `observer is None`. Arguments are digested only for the audit trail.
    `instance()` names this troupe in a cluster."""
    audit = config.audit
    if audit is None:
        return (Observer(instance, tuple(listeners), digest=False) if listeners else None), None
    writer = AuditWriter(AuditFile(audit.file, audit.max_bytes, audit.keep)).start()
    return Observer(instance, (writer.offer, *listeners)), writer


def status(writer: AuditWriter | None) -> dict:
    """The audit section of /status: {} without an audit trail."""
    return writer.stats() if writer is not None else {}


def stop(writer: AuditWriter | None) -> None:
    if writer is not None:
        writer.stop()
