"""The Session's side of a cached call: what makes a call cacheable (its Plan), the lookup sent to
the CacheKeeper with the Session's own deadline on it, and then either the cached answer at once
(its _meta marked) or the call forwarded as usual, its successful result stored on the way back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import orjson

from actors.caching import keys, policy
from actors.caching.messages import CacheAnswered, LookedUp, LookUp, Store
from actors.downstream.calls import IDEMPOTENT_METHODS, LOOKUP
from actors.protocol import modern
from actors.tells import tell
from actors.settings.model import SHARE_PER_CLIENT

if TYPE_CHECKING:
    from actors.catalogue import views
    from actors.downstream.calls import CallTable
    from actors.runtime import Runtime

LOOKUP_DEADLINE = 1.0  # seconds a Session waits for the cache before it forwards the call anyway
FORWARD_MARGIN = 2.0  # once forwarded, the call's deadline: its server's timeout and this (as Session's own)
META_KEY = "troupe/cache"  # in a cached result's _meta: {"hit": true, "age_s": …}


@dataclass(frozen=True, slots=True)
class Plan:
    """A call that may be answered from the cache: its key and how long its answer may be kept."""

    key: keys.CacheKey
    ttl: float


class CachedCalls:
    """Mixed into Session: cacheable tools/call and resources/read go through the CacheKeeper
    (`rt.cache`). A lookup under way is a call of the Session's own table in phase LOOKUP, with a
    deadline, so a keeper that is slow, stopped or broken costs a call its cache, never its answer."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        profile: views.Profile | None
        client_name: str | None
        actor_ref: Any

        calls: CallTable

        def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                     retry: bool | None = None) -> None: ...
        def _send(self, call) -> None: ...
        def _answer(self, token: int, outcome, shaped: bool = False) -> None: ...

    # ---------------------------------------------------------------- plans

    def _audience(self, server: str) -> str:
        view = self.rt.servers.current.get(server)
        auth = view.config.auth if view is not None else None
        per_client = bool(auth is not None and auth.per_client)
        profile = self.profile.name if self.profile is not None else None
        if view is not None and view.config.share == SHARE_PER_CLIENT:  # each client's own upstream answers it
            return keys.audience(profile, "session:" + self.actor_ref.actor_urn)
        return keys.audience(profile, self.client_name if per_client else None)

    def tool_plan(self, server: str, tool: str, definition, arguments: dict) -> Plan | None:
        """The plan of a tools/call of `tool` (the server's own name), or None: not cached."""
        view = self.rt.servers.current.get(server)
        ttl = policy.tool_ttl(view.config.cache if view is not None else None, tool, definition)
        if ttl is None:
            return None
        return Plan(keys.tool_key(server, tool, arguments, self._audience(server)), ttl)

    def resource_plan(self, server: str, uri: str) -> Plan | None:
        """The plan of a resources/read of `uri` (the server's own), or None: not cached."""
        view = self.rt.servers.current.get(server)
        ttl = policy.resource_ttl(view.config.cache if view is not None else None)
        if ttl is None:
            return None
        return Plan(keys.resource_key(server, uri, self._audience(server)), ttl)

    # ---------------------------------------------------------------- the call

    def _forward_cached(self, plan: Plan | None, rid, server: str, method: str, params: dict, sink, shape,
                        progress_token=None, retry: bool | None = None) -> None:
        """`_forward`, answered from the cache when `plan` finds an entry there. The lookup is a
        phase of the call in the Session's call table: a cancel withdraws it, and its deadline
        (LOOKUP_DEADLINE) sends the call on without the cache."""
        cache = self.rt.cache
        if plan is None or cache is None or (isinstance(sink, modern.ModernSink) and sink.retry is not None):
            # not cacheable, or a modern client's next round of a call that asked for input
            self._forward(rid, server, method, params, sink, shape, progress_token, retry)
            return
        call = self.calls.open(rid, sink, shape, LOOKUP, LOOKUP_DEADLINE)
        call.server, call.method, call.params, call.progress_token, call.plan = server, method, params, \
            progress_token, plan
        call.retry = method in IDEMPOTENT_METHODS if retry is None else retry
        me, token = self.actor_ref, call.token

        def reply(found: LookedUp) -> None:  # runs in the keeper's (or a Redis reader's) greenlet
            tell(me, CacheAnswered(token, found))
        if not tell(cache, LookUp(plan.key, reply)):
            self._cache_answered(CacheAnswered(token, None))  # no cache: forwarded at once

    def _cache_answered(self, msg: CacheAnswered) -> None:
        call = self.calls.current(msg.lookup)
        if call is None or call.phase != LOOKUP:
            return  # answered already (the deadline, then a late reply), or cancelled meanwhile
        found = msg.found
        if found is not None and found.body is not None:
            cached = orjson.loads(found.body)
            shape, age = call.shape, found.age_s
            call.shape = lambda rid, outcome: marked(shape(rid, outcome), age)
            self._answer(call.token, cached)
            return
        call.shape = storing(call.shape, call.plan, found.epoch if found is not None else None, self.rt.cache)
        self.calls.rearm(call, self.rt.server_timeout(call.server) + FORWARD_MARGIN)
        self._send(call)


def storing(shape: Callable, plan: Plan, epoch: int | None, cache) -> Callable:
    """`shape`, which first tells the keeper to store a successful outcome (never an error, an
    isError result or a round waiting for input); `epoch` None: the lookup failed, nothing stored."""
    if epoch is None or cache is None:
        return shape

    def shape_and_store(rid, outcome) -> dict:  # runs in the Session's greenlet (Session._settle)
        if policy.storable(outcome):
            tell(cache, Store(plan.key, orjson.dumps(outcome), plan.ttl, epoch))
        return shape(rid, outcome)
    return shape_and_store


def marked(answer: dict, age_s: float) -> dict:
    """A cached answer with `_meta["troupe/cache"]` saying so (and how old it is)."""
    result = answer.get("result")
    if not isinstance(result, dict):
        return answer
    meta = result.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta[META_KEY] = {"hit": True, "age_s": round(age_s, 3)}
    return {**answer, "result": {**result, "_meta": meta}}
