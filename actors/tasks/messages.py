"""What Sessions and the TaskKeeper tell each other. Every reply goes through an `on_reply`
callback that only tells the caller's mailbox (as a Connection's Forward does), so the Session's
call table, deadline and cancels work for task requests exactly as for forwarded calls."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from loguru import logger

from actors.tasks.ids import TaskRef


@dataclass(frozen=True, slots=True)
class TaskCall:
    """A task-capable client's tools/call, told by its Session to the TaskKeeper instead of to the
    server's Connection. The keeper sends it on (`target`) and answers `on_reply` once: with the
    server's own task (sealed), the plain result when it came first, or a task the keeper minted
    when the call had no answer within `mint_after` seconds (0: at once; a server with tasks of
    its own gets none minted). The Session's token is `origin_request`: its CancelForward names it."""

    server: str
    form: str  # the server's tasks for this tool: wire.MODERN, wire.LEGACY or "" (troupe mints)
    params: dict  # what goes upstream: name, arguments, _meta
    target: Any  # the Connection (or a cluster front or client route) the call goes to
    owner: str  # sealed into the task's id ("" for an anonymous modern caller: the id is the capability)
    cap_key: str  # whose live tasks count against serve.tasks.max_per_client
    legacy_client: bool  # a 2025-11-25 client: answered with `{task: …}` at once, never a plain result
    mint_after: float | None  # seconds before troupe mints a task (None: never; the server's own only)
    ttl_ms: int | None  # the TTL the client asked for (2025-11-25 `task.ttl`), if any
    max_duration: float  # how long a minted task's upstream call may run (the server's, else serve.tasks')
    client_capabilities: Any  # what the call tells the server of its client (the tasks extension included)
    client: str | None  # the serve.clients name, for a per-client upstream's token
    log_level: str | None
    on_reply: Callable[[Any], None]
    origin: Any  # the Session's ref: its CancelForward, and where a legacy client's questions go
    origin_request: int


@dataclass(frozen=True, slots=True)
class TaskOp:
    """A client's tasks/get, tasks/update, tasks/cancel, tasks/result or tasks/list, told by its
    Session once the task id opened for this caller (`ref`; None for tasks/list). `target` is the
    Connection of the task's server for a task that server runs (None when it is not running)."""

    method: str
    ref: TaskRef | None
    params: dict
    target: Any
    owner: str
    legacy_client: bool
    on_reply: Callable[[Any], None]
    origin: Any
    origin_request: int
    client: str | None = None  # the serve.clients name, for a per-client upstream's token


@dataclass(frozen=True, slots=True)
class WatchTasks:
    """Told by a Session: tell it TaskChanged for these task ids (its listen streams asked for them)."""

    session: Any
    task_ids: tuple


@dataclass(frozen=True, slots=True)
class UnwatchTasks:
    """Told by a Session when it stops: it wants no more TaskChanged."""

    session: Any


@dataclass(frozen=True, slots=True)
class TaskChanged:
    """Told by the TaskKeeper to a Session watching `task_id` (and to a legacy session that created
    it): the task's whole state now, in the modern shape (`task`)."""

    task_id: str
    task: dict


@dataclass(frozen=True, slots=True)
class GetTaskStats:
    """Ask the TaskKeeper for its figures: tasks by state, minted and relayed; answered on `future`."""

    future: Any


@dataclass(frozen=True, slots=True)
class TasksJoined:
    """Told by the Runtime to a cluster's TaskKeeper once this instance knows its name in the
    cluster: from then on its minted tasks are written to Redis under that name."""

    instance: str


# ------------------------------------------------------------ the TaskKeeper's own


class UpstreamAnswered:
    """Told by a reply callback to the TaskKeeper: the server answered a task's tools/call (or, with
    `follow`, the tasks/result troupe keeps open for a 2025-11-25 server's task)."""

    __slots__ = ("local", "outcome", "follow")

    def __init__(self, local: str, outcome: Any, follow: bool = False) -> None:
        self.local, self.outcome, self.follow = local, outcome, follow


class MintDue:
    """Told by the TaskKeeper's timer: mint_after passed for a call that may still have no answer."""

    __slots__ = ("local",)

    def __init__(self, local: str) -> None:
        self.local = local


class QuestionAnswered:
    """Told by a Session's reply callback: a legacy client waiting on tasks/result answered the task's
    question `key`."""

    __slots__ = ("local", "key", "outcome")

    def __init__(self, local: str, key: str, outcome: Any) -> None:
        self.local, self.key, self.outcome = local, key, outcome


class Tick:
    """The TaskKeeper's own clock: sweep expired tasks, poll the watched ones of modern servers."""


def deliver(on_reply: Callable[[Any], None] | None, outcome: Any) -> None:
    """Answer a caller through its reply callback; a failing callback must not take the keeper down."""
    if on_reply is None:
        return
    try:
        on_reply(outcome)
    except Exception:
        logger.exception("task keeper: a reply could not be delivered")
