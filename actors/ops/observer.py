"""The seam between the call path and what watches it: the call path tells an Observer (in the
Session's context) how each client call that reached a server or a core tool ended, as one
CallRecord, and each operator act as an ActRecord; the Observer hands them to its listeners (the
audit writer; whatever else subscribes later). Nothing here blocks or does I/O."""
from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

from loguru import logger

from actors.ops import records
from actors.ops.records import ActRecord, CallRecord
from actors.protocol import modern

Listener = Callable[[Any], None]  # takes a CallRecord or an ActRecord; must return at once


class Observer:
    """Runtime-wide, immutable once built: how to read this troupe's instance name (`instance()`:
    a cluster's instance is named once troupe knows the URL it serves on) and its listeners. A
    listener runs in the greenlet of whoever reports (a Session, an HTTP handler), so it only
    queues; one that raises is logged and stops nothing (the call path must not fail for its
    audit)."""

    __slots__ = ("instance", "_listeners", "digest")

    def __init__(self, instance: Callable[[], str | None], listeners: tuple[Listener, ...],
                 digest: bool = True) -> None:
        self.instance = instance
        self._listeners = listeners
        self.digest = digest  # the arguments' SHA-256 in each record (the audit trail's; no one else needs it)

    def report(self, record: CallRecord | ActRecord) -> None:
        """Hand `record` to every listener."""
        for listener in self._listeners:
            try:
                listener(record)
            except Exception:  # an audit listener's bug must not fail the call it reports
                logger.exception("audit: a listener failed on a {}", type(record).__name__)

    def session(self, key: str, client: str | None, profile: str | None) -> SessionAudit:
        """The audit side of one Session (its key, client and profile fixed for its life)."""
        return SessionAudit(self, key, client, profile)

    def act(self, act: str, server: str, by: str | None, via: str) -> None:
        """An operator act, now."""
        self.report(ActRecord(time.time(), self.instance(), act, server, by, via))


class Begun(NamedTuple):
    """What a call's record knows when the call is accepted (kept on its Call until it ends):
    wall-clock and monotonic start, era, method, server, target and the arguments' digest. A
    NamedTuple, immutable like the record, and made on every call: a third of a frozen
    dataclass's cost to build (0.25 µs against 0.7)."""

    time: float
    started: float
    era: str
    method: str
    server: str | None
    target: str | None
    args_sha256: str | None
    trace_id: int | None = None  # the call's trace, as tracing.Tracing.trace_of gives it


class SessionAudit:
    """One Session's side of the Observer: `begin` when a call is accepted, `ended` once its one
    outcome is decided. Used only from its Session's greenlet; holds nothing that changes."""

    __slots__ = ("_observer", "_key", "_client", "_profile")

    def __init__(self, observer: Observer, key: str, client: str | None, profile: str | None) -> None:
        self._observer, self._key, self._client, self._profile = observer, key, client, profile

    def begin(self, method: str, server: str | None, params: Any, sink, trace_id: int | None = None) -> Begun:
        """A forwarded request (`params` as it goes to `server`) is accepted; `trace_id`: its trace's."""
        target, arguments = records.target_and_arguments(method, params)
        return self.begin_named(method, server, target, arguments, sink, trace_id)

    def begin_named(self, method: str, server: str | None, target: str | None, arguments: Any, sink,
                    trace_id: int | None = None) -> Begun:
        """A call of `target` with `arguments` (a core tool, a workflow run) is accepted."""
        era = "legacy" if modern.envelope_of(sink) is None else "modern"
        digest = records.args_digest(arguments) if self._observer.digest else None
        return Begun(time.time(), time.monotonic(), era, method, server, target, digest, trace_id)

    def answered(self, begun: Begun, outcome: Any, from_cache: bool = False) -> None:
        """The call ended with `outcome` (an UpstreamError, a result, or a whole answer: see
        records.outcome_of). Never raises: it runs just before the call's answer goes out."""
        try:
            kind, code = records.outcome_of(outcome, from_cache)
        except Exception:  # an outcome of a shape no rule knows: its line says error, its answer still goes
            logger.exception("audit: the outcome of a {} could not be read", begun.method)
            kind, code = records.ERROR, None
        self.ended(begun, kind, code)

    def ended(self, begun: Begun, outcome: str, code: int | None = None) -> None:
        """The call ended with `outcome` (records.OUTCOMES) and, for an error, its JSON-RPC code.
        Never raises: the call path runs it before the call's answer goes out, and a record that
        cannot be made must not cost the client that answer."""
        try:
            self._observer.report(CallRecord(
                begun.time, self._observer.instance(), self._client, self._profile, self._key, begun.era,
                begun.method, begun.server, begun.target, begun.args_sha256, outcome, code,
                (time.monotonic() - begun.started) * 1000.0, begun.trace_id))
        except Exception:
            logger.exception("audit: the record of a {} could not be made", begun.method)

    def refused(self, method: str, server: str | None, params: Any, sink, outcome: str, code: int | None) -> None:
        """A call refused at once, before it was accepted (a rate limit, say): its record, now."""
        self.ended(self.begin(method, server, params, sink), outcome, code)
