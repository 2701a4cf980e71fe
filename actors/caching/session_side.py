"""The Session's side of a cached call: what makes a call cacheable (its Plan), the lookup sent to
the CacheKeeper with the Session's own deadline on it, and then either the cached answer at once
(its _meta marked) or the call forwarded as usual, its successful result stored on the way back."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import orjson

from actors.caching import keys, policy
from actors.caching.messages import CacheAnswered, LookedUp, LookUp, Store
from actors.downstream.calls import IDEMPOTENT_METHODS, LOOKUP
from actors.downstream.forwarder import DEADLINE_MARGIN
from actors.protocol import modern
from actors.tells import tell
from actors.settings.model import SHARE_PER_CLIENT

if TYPE_CHECKING:
    from actors.downstream.calls import CallTable
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.forwarder import Forwarder

LOOKUP_DEADLINE = 1.0  # seconds a Session waits for the cache before it forwards the call anyway
META_KEY = "troupe/cache"  # in a cached result's _meta: {"hit": true, "age_s": …}


@dataclass(frozen=True, slots=True)
class Plan:
    """A call that may be answered from the cache: its key and how long its answer may be kept."""

    key: keys.CacheKey
    ttl: float


class CacheSide:
    """A Session's cacheable tools/call and resources/read go through the CacheKeeper
    (`ctx.cache`). A lookup under way is a call of the Session's own table in phase LOOKUP, with a
    deadline, so a keeper that is slow, stopped or broken costs a call its cache, never its answer.
    A plain object used only from its Session's greenlet, with explicit inputs: the context, the
    Session's ref, its client's view (profile and name), its call table and its Forwarder."""

    def __init__(self, ctx: SessionContext, me, view: ClientView, table: CallTable, forwarder: Forwarder) -> None:
        self._ctx, self._me, self._view, self._table, self._fw = ctx, me, view, table, forwarder

    # ---------------------------------------------------------------- plans

    def _audience(self, server: str) -> str:
        view = self._ctx.servers().get(server)
        auth = view.config.auth if view is not None else None
        per_client = bool(auth is not None and auth.per_client)
        profile = self._view.profile.name if self._view.profile is not None else None
        if view is not None and view.config.share == SHARE_PER_CLIENT:  # each client's own upstream answers it
            return keys.audience(profile, "session:" + self._me.actor_urn)
        return keys.audience(profile, self._view.client_name if per_client else None)

    def tool_plan(self, server: str, tool: str, definition, arguments: dict) -> Plan | None:
        """The plan of a tools/call of `tool` (the server's own name), or None: not cached."""
        view = self._ctx.servers().get(server)
        ttl = policy.tool_ttl(view.config.cache if view is not None else None, tool, definition)
        if ttl is None:
            return None
        return Plan(keys.tool_key(server, tool, arguments, self._audience(server)), ttl)

    def resource_plan(self, server: str, uri: str) -> Plan | None:
        """The plan of a resources/read of `uri` (the server's own), or None: not cached."""
        view = self._ctx.servers().get(server)
        ttl = policy.resource_ttl(view.config.cache if view is not None else None)
        if ttl is None:
            return None
        return Plan(keys.resource_key(server, uri, self._audience(server)), ttl)

    # ---------------------------------------------------------------- the call

    def forward(self, plan: Plan | None, rid, server: str, method: str, params: dict, sink, shape,
                        progress_token=None, retry: bool | None = None, admitted: bool = False) -> None:
        """`_forward`, answered from the cache when `plan` finds an entry there. The lookup is a
        phase of the call in the Session's call table: a cancel withdraws it, and its deadline
        (LOOKUP_DEADLINE) sends the call on without the cache. The rate limits are checked first
        (unless the caller did: `admitted`), a cache hit included: a limit counts requests."""
        if not admitted and not self._fw.admit(rid, server, method, sink, params):
            return
        cache = self._ctx.cache
        if plan is None or cache is None or (isinstance(sink, modern.ModernSink) and sink.retry is not None):
            # not cacheable, or a modern client's next round of a call that asked for input
            self._fw.forward(rid, server, method, params, sink, shape, progress_token, retry, admitted=True)
            return
        call = self._table.open(rid, sink, shape, LOOKUP, LOOKUP_DEADLINE)
        call.server, call.method, call.params, call.progress_token, call.plan = server, method, params, \
            progress_token, plan
        call.retry = method in IDEMPOTENT_METHODS if retry is None else retry
        self._fw.began(call)
        me, token = self._me, call.token

        def reply(found: LookedUp) -> None:  # runs in the keeper's (or a Redis reader's) greenlet
            tell(me, CacheAnswered(token, found))
        if not tell(cache, LookUp(plan.key, reply)):
            self.answered(CacheAnswered(token, None))  # no cache: forwarded at once

    def answered(self, msg: CacheAnswered) -> None:
        call = self._table.current(msg.lookup)
        if call is None or call.phase != LOOKUP:
            return  # answered already (the deadline, then a late reply), or cancelled meanwhile
        found = msg.found
        if found is not None and found.body is not None:
            cached = orjson.loads(found.body)
            shape, age = call.shape, found.age_s
            call.shape = lambda rid, outcome: marked(shape(rid, outcome), age)
            self._fw.answer(call.token, cached)
            return
        call.shape = storing(call.shape, call.plan, found.epoch if found is not None else None, self._ctx.cache)
        self._table.rearm(call, self._ctx.server_timeout(call.server) + DEADLINE_MARGIN)
        self._fw.send(call)


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
