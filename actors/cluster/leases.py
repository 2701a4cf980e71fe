"""LeaseKeeper: which instance runs each `single` server, decided by leases in Redis.

A lease is `<prefix>:lease:<server>` = "<instance>|<nonce>", set with NX and a TTL of one lease
period and renewed every third of it by its holder only (a Lua check-and-renew); each taking of
a lease increments `<prefix>:fence:<server>`, the fencing generation. The holder runs the child;
every other instance relays calls to it. A holder that cannot renew (Redis down) gives the server
up when its last renewal is a lease old, so two instances never run one `single` server for
longer than one lease period. A stopping instance deletes its leases, so the others take over at
once instead of after the TTL.
"""
from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

import gevent
import orjson
import pykka
from loguru import logger

from actors.cluster.instances import SetOwned
from actors.cluster.link import LinkDown, RedisLink
from actors.cluster.settings import ClusterConfig
from actors.published import Publisher
from actors.tells import tell as _tell

# KEYS[1] lease, KEYS[2] fence; ARGV[1] holder, ARGV[2] ttl ms → the new fence, or 0 if held.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""
# KEYS[1] lease; ARGV[1] holder, ARGV[2] ttl ms → 1 if still ours and renewed, else 0.
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
# KEYS[1] lease; ARGV[1] holder → deleted only if ours.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
TICKS_PER_LEASE = 3


@dataclass(frozen=True, slots=True)
class LeaseChanged:
    """Told by the LeaseKeeper to the Supervisor: server `server` now runs on `owner` (reached at
    `url`), here if `mine` (with fencing generation `fence`); owner None: nobody holds it now."""

    server: str
    owner: str | None
    url: str | None
    mine: bool
    fence: int = 0


@dataclass(frozen=True, slots=True)
class JoinedCluster:
    """Told by the ClusterMember to the Supervisor once this instance is in its cluster: the lease
    keeper to tell which `single` servers it has, the cluster secret relays present, and the
    clients' bearer token a relay to another instance must carry too (None: none is set)."""

    keeper: pykka.ActorRef
    token: str
    auth_token: str | None = None


@dataclass(frozen=True, slots=True)
class WantLeases:
    """Told by the Supervisor to the LeaseKeeper: the `single` servers it has (leases for any
    other server this instance holds are released)."""

    servers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Tick:
    """Told by the keeper's own timer greenlet: take, renew or look up every wanted lease now."""


class LeaseKeeper(pykka.ThreadingActor):
    """Owns this instance's leases (held: server → fence and last renewal) and what it last told
    the Supervisor about each server. Receives WantLeases and _Tick; tells the Supervisor
    LeaseChanged and the InstanceRegistry SetOwned; publishes the held set (a frozenset replaced
    whole, through the Publisher of the Published[frozenset] the relay endpoint reads)."""

    def __init__(self, link: RedisLink, cluster: ClusterConfig, supervisor: pykka.ActorRef,
                 instances: pykka.ActorRef | None, owned: Publisher[frozenset]) -> None:
        super().__init__()
        self.link, self.cluster, self.supervisor, self.instances, self.owned = link, cluster, supervisor, \
            instances, owned
        self.holder = f"{cluster.instance}|{secrets.token_hex(6)}"  # a restarted instance holds nothing old
        self.ttl_ms = int(cluster.lease * 1000)
        self.wanted: tuple[str, ...] = ()
        self.held: dict[str, tuple[int, float]] = {}  # server → (fence, monotonic time of last renewal)
        self.told: dict[str, tuple] = {}  # server → (owner, url, mine) last told to the Supervisor
        self._timer: gevent.Greenlet | None = None

    def on_start(self) -> None:
        self._timer = gevent.spawn(self._ticks, self.actor_ref, self.cluster.lease / TICKS_PER_LEASE)

    def on_stop(self) -> None:
        if self._timer is not None:
            self._timer.kill(block=False)
        for server in list(self.held):
            self._release(server)
        self._publish_owned()

    def on_receive(self, message):
        match message:
            case WantLeases(servers=servers):
                self.wanted = tuple(servers)
                for server in [s for s in self.held if s not in servers]:
                    self._release(server)
                self._publish_owned()
                self._tick()
            case _Tick():
                self._tick()
            case _:
                logger.warning("cluster: lease keeper got unknown message {!r}", message)

    @staticmethod
    def _ticks(me: pykka.ActorRef, every: float) -> None:
        while _tell(me, _Tick()):
            gevent.sleep(every)

    # ---------------------------------------------------------------- one round

    def _tick(self) -> None:
        now = time.monotonic()
        down = False
        for server in self.wanted:
            if not down:
                try:
                    if server in self.held:
                        self._renew(server, now)
                    else:
                        self._take_or_follow(server)
                    continue
                except LinkDown:
                    down = True  # no more Redis calls this round: each would wait out its timeout
            # Redis is down: a lease we hold is given up once its last renewal is a lease old
            # (another instance may hold it by then); the others keep what they know.
            held = self.held.get(server)
            if held is not None and now - held[1] >= self.cluster.lease:
                logger.warning("cluster: lease of {} not renewed for {:g}s (Redis down): giving it up",
                               server, self.cluster.lease)
                del self.held[server]
                self._tell_supervisor(server, None, None, False)
        self._publish_owned()

    def _renew(self, server: str, now: float) -> None:
        fence, _ = self.held[server]
        if self.link.run(lambda r: r.eval(RENEW, 1, self._lease_key(server), self.holder, self.ttl_ms)):
            self.held[server] = (fence, now)
            return
        logger.warning("cluster: lease of {} was lost", server)
        del self.held[server]
        self._take_or_follow(server)

    def _take_or_follow(self, server: str) -> None:
        fence = self.link.run(lambda r: r.eval(ACQUIRE, 2, self._lease_key(server), self.link.key("fence", server),
                                                self.holder, self.ttl_ms))
        if fence:
            self.held[server] = (int(fence), time.monotonic())
            logger.info("cluster: this instance now runs {} (fence {})", server, fence)
            self._tell_supervisor(server, self.cluster.instance, self.cluster.advertise, True, int(fence))
            return
        owner, url = self._holder_of(server)
        self._tell_supervisor(server, owner, url, False)

    def _holder_of(self, server: str) -> tuple[str | None, str | None]:
        """The instance holding the lease and its URL (None, None if the lease just expired or its
        instance has stopped beating: wait for the next round rather than relay to the dead)."""
        raw = self.link.run(lambda r: r.get(self._lease_key(server)))
        if not raw:
            return None, None
        owner = raw.decode("utf-8", "replace").split("|", 1)[0]
        entry = self.link.run(lambda r: r.get(self.link.key("instance", owner)))
        try:
            url = orjson.loads(entry).get("url") if entry else None
        except (orjson.JSONDecodeError, AttributeError):
            url = None
        return (owner, url) if url else (None, None)

    def _release(self, server: str) -> None:
        self.held.pop(server, None)
        try:
            self.link.run(lambda r: r.eval(RELEASE, 1, self._lease_key(server), self.holder))
        except LinkDown:
            pass  # it expires within a lease anyway

    def _lease_key(self, server: str) -> str:
        return self.link.key("lease", server)

    def _tell_supervisor(self, server: str, owner: str | None, url: str | None, mine: bool, fence: int = 0) -> None:
        if self.told.get(server) == (owner, url, mine):
            return
        self.told[server] = (owner, url, mine)
        _tell(self.supervisor, LeaseChanged(server, owner, url, mine, fence))

    def _publish_owned(self) -> None:
        owned = frozenset(self.held)
        if owned != self.owned.current:
            self.owned.publish(owned)
            if self.instances is not None:
                _tell(self.instances, SetOwned(tuple(sorted(owned))))
