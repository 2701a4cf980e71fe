"""Events fanned out by the EventBus, named in the past tense; emitted on transitions only."""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

LOG_DATA_HISTORY_BYTES = 4096  # a ServerLogged payload keeps this much in the bus history


def _now() -> float:
    return time.time()


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every bus event; `at` is wall-clock seconds. `origin` names the cluster instance an
    event came from over the Redis bridge ("" for this instance's own: those alone are bridged, so
    nothing loops back)."""

    at: float = field(default_factory=_now, kw_only=True)
    origin: str = field(default="", kw_only=True)

    @property
    def kind(self) -> str:
        return type(self).__name__

    def for_history(self) -> Event:
        """The copy the bus keeps in its history (bounded in bytes); live subscribers get self."""
        return self

    def to_json(self) -> dict:
        """A plain dict for /events and core_events; events never hold secrets."""
        out: dict[str, Any] = {"type": self.kind}
        for name in self.__dataclass_fields__:
            out[name] = _plain(getattr(self, name))
        if not self.origin:  # a single troupe's /events stays as it was
            del out["origin"]
        return out


def from_json(data: dict, origin: str) -> Event | None:
    """The event `to_json` described, marked as from `origin`; None for an unknown kind or shape
    (an instance running a newer troupe may publish kinds this one does not know)."""
    cls = KINDS.get(str(data.get("type")))
    if cls is None:
        return None
    fields: dict[str, Any] = {name: tuple(v) if isinstance(v, list) else v
              for name, v in data.items() if name in cls.__dataclass_fields__ and name != "origin"}
    if "lists" in fields:  # ToolsChanged's one frozenset
        fields["lists"] = frozenset(fields["lists"])
    try:
        return cls(**fields, origin=origin)
    except TypeError:
        return None


def _plain(value: Any) -> Any:
    if isinstance(value, (tuple, list, frozenset, set)):
        return [_plain(v) for v in value]
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class ServerStateChanged(Event):
    """A server moved between starting/ready/degraded/backoff/failed/stopped."""

    server: str
    old: str
    new: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ServerConnected(Event):
    """Published by the Supervisor when a server's connection became ready (`tools`: how many it lists)."""

    server: str
    tools: int = 0


@dataclass(frozen=True, slots=True)
class ServerDisconnected(Event):
    """Published by the Supervisor when a ready server's connection failed; a restart or an open circuit follows."""

    server: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ServerRestarted(Event):
    """Published by the Supervisor when a failed server is to restart after `backoff_s` (its `restarts`-th restart)."""

    server: str
    restarts: int
    backoff_s: float


@dataclass(frozen=True, slots=True)
class CircuitOpened(Event):
    """Published by the Supervisor when a server failed `failures` times within its policy period:
    it stays failed until the cooldown has passed."""

    server: str
    failures: int
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ServerIdled(Event):
    """Published by the Supervisor when an on-demand server was stopped for having nothing going
    on for `idle_s` seconds (or after the start that learned its lists, `learned`): its lists stay served."""

    server: str
    idle_s: float = 0.0
    learned: bool = False


@dataclass(frozen=True, slots=True)
class ServerWoken(Event):
    """Published by the Supervisor when a first use (a call, read, prompts/get, completion or
    subscription) starts an idle on-demand server: its `wakes`-th start on demand."""

    server: str
    wakes: int
    method: str = ""


@dataclass(frozen=True, slots=True)
class ToolsChanged(Event):
    """The catalogue changed; `lists` names which lists (tools/resources/prompts)."""

    lists: frozenset = frozenset()
    version: int = 0


@dataclass(frozen=True, slots=True)
class ServerListChanged(Event):
    """Published by a Connection when its server sent a list_changed notification: `lists` names
    which (tools, resources, templates, prompts). In a storm, once per coalesced re-list at most,
    never before a notification it stands for (see UpstreamLists). The catalogue's own
    ToolsChanged follows only if the listing differs; answers cached from this server are
    dropped either way."""

    server: str
    lists: frozenset = frozenset()


@dataclass(frozen=True, slots=True)
class StartupSettled(Event):
    """Every auto-start server is ready or has failed (the first tools/list may answer)."""


@dataclass(frozen=True, slots=True)
class ResourceUpdated(Event):
    """An upstream sent notifications/resources/updated for `uri` (its own URI)."""

    server: str
    uri: str


@dataclass(frozen=True, slots=True)
class ServerLogged(Event):
    """An upstream sent notifications/message; sessions relay it by their own level."""

    server: str
    level: str
    logger: str | None = None
    data: object = None

    def for_history(self) -> ServerLogged:
        """Keeps the first LOG_DATA_HISTORY_BYTES of a big payload, as text with a marker."""
        data = self.data
        if isinstance(data, str):
            if len(data) <= LOG_DATA_HISTORY_BYTES // 4:  # 4 bytes per character at most: fits
                return self
            raw = data.encode("utf-8", "replace")
        else:
            try:
                raw = orjson.dumps(data)
            except TypeError:
                raw = str(data).encode("utf-8", "replace")
        if len(raw) <= LOG_DATA_HISTORY_BYTES:
            return self
        kept = raw[:LOG_DATA_HISTORY_BYTES].decode("utf-8", "ignore")
        return replace(self, data=f"{kept}… [truncated by troupe: {len(raw)} bytes]")


@dataclass(frozen=True, slots=True)
class ServiceAdded(Event):
    """Published by the DiscoveryEngine: a new service; `source` is the provider of its best record."""

    service: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class ServiceRemoved(Event):
    """Published by the DiscoveryEngine: a service no source lists any more."""

    service: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class ServiceUpdated(Event):
    """Published by the DiscoveryEngine: a known service's launch details, or only its sources or tags, changed."""

    service: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class HealthChanged(Event):
    """Published by the HealthChecker when a service's health changes (from unknown too);
    the DiscoveryEngine keeps it for its service summaries."""

    service: str
    healthy: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DiscoveryCompleted(Event):
    """Published by the DiscoveryEngine after each cycle: services `found`, how long it took, error lines."""

    found: int
    duration_s: float
    errors: tuple = ()


@dataclass(frozen=True, slots=True)
class ConfigReloaded(Event):
    """Published by the ConfigWatcher after a reload changed servers: the names added, removed and changed."""

    added: tuple = ()
    removed: tuple = ()
    changed: tuple = ()


@dataclass(frozen=True, slots=True)
class ApprovalAwaited(Event):
    """A server was seen that may not run until an operator approves it (never executed yet)."""

    server: str
    provenance: str
    file: str


@dataclass(frozen=True, slots=True)
class ApprovalDecided(Event):
    """An operator approved or denied a server (its exact launch line or URL)."""

    server: str
    decision: str  # approved | denied


@dataclass(frozen=True, slots=True)
class ToolDefinitionChanged(Event):
    """A server listed a tool or prompt that differs from its pin, or a new one; it is withheld."""

    server: str
    item: str  # the tool's or prompt's name as the server lists it
    listing: str  # tools | prompts
    change: str  # changed | new
    diff: str  # unified diff of the pinned definition against the listed one


KINDS: dict[str, type[Event]] = {cls.__name__: cls for cls in Event.__subclasses__()}
