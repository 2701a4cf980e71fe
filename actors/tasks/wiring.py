"""How the Runtime starts the TaskKeeper and reads its figures for /status."""
from __future__ import annotations

import pykka
from loguru import logger

from actors.protocol.request_state import StateSealer
from actors.settings.model import Config
from actors.tasks.ids import TaskIds
from actors.tasks.keeper import TaskKeeper
from actors.tasks.messages import GetTaskStats, TasksJoined
from actors.tells import tell

STATS_TIMEOUT = 1.0  # the status report waits this long at most for the keeper's figures
# A task id outlives the longest task and its kept result by this much, then opens no more.
ID_GRACE_S = 3600.0


def ids_for(config: Config, sealer: StateSealer) -> TaskIds:
    """Task ids under troupe's state key, valid as long as any task could still be kept."""
    longest = max([config.serve.tasks.max_duration,
                   *(s.task_max_duration for s in config.servers if s.task_max_duration)])
    return TaskIds(sealer, longest + config.serve.tasks.ttl + ID_GRACE_S)


def start_keeper(config: Config, ids: TaskIds, shared=None) -> pykka.ActorRef:
    """The TaskKeeper; in a cluster (`shared`, the cluster's SharedState, whose link it uses) its
    minted tasks are kept in Redis too, so every instance answers for them (clustered.py)."""
    side = None
    if shared is not None:
        from actors.tasks.clustered import SharedTasks  # a cluster's only: a troupe alone loads no Redis code
        from actors.tasks.shared_store import RedisTasks
        side = SharedTasks(RedisTasks(shared.link), config.serve.tasks.ttl, ids.lifetime)
    return TaskKeeper.start(config.serve.tasks, ids, side)


def joined(ref: pykka.ActorRef | None, instance: str) -> None:
    """Tell a cluster's keeper the name this instance has in the cluster (known once it serves)."""
    if ref is not None and not tell(ref, TasksJoined(instance)):
        logger.warning("the task keeper has stopped: its tasks are not shared with the cluster")


def task_status(ref: pykka.ActorRef | None, timeout: float = STATS_TIMEOUT) -> dict:
    """The tasks section of /status (edge code only: it waits, bounded)."""
    if ref is None:
        return {}
    future = pykka.ThreadingFuture()
    if not tell(ref, GetTaskStats(future)):
        return {"error": "the task keeper did not answer: ActorDeadError"}
    try:
        return future.get(timeout=timeout)
    except (pykka.ActorDeadError, pykka.Timeout) as exc:
        return {"error": f"the task keeper did not answer: {type(exc).__name__}"}
