"""A Session's side of tasks: which tools/call becomes a task request, the tasks/* methods, and the
task ids a listen stream may follow. Every request goes to the TaskKeeper as an entry of the
Session's own call table (FORWARDED, with the keeper as its callee), so the Session's deadline,
a cancel and the client's leaving work as for any forwarded call, and it is answered once."""
from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from actors.downstream.calls import FORWARDED
from actors.downstream.forwarder import DEADLINE_MARGIN
from actors.downstream.replies import passthrough, tool_outcome
from actors.messages import ForwardReplied
from actors.protocol import jsonrpc, modern
from actors.tasks import wire
from actors.tasks.messages import TaskCall, TaskOp, WatchTasks
from actors.tells import tell

if TYPE_CHECKING:
    from actors.catalogue.snapshot import Entry
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.forwarder import Forwarder
    from actors.downstream.lifecycle import Handshake


TASKS_REVISION = "2025-11-25"  # the one handshake-era revision with tasks


def offered(ctx: SessionContext, cat) -> bool:
    """Whether troupe offers tasks to a client of catalogue view `cat`: it mints them, or a server
    it serves makes its own."""
    return ctx.tasks is not None and (ctx.serve.tasks.mint_after is not None or bool(cat.task_forms))


def legacy_capability(ctx: SessionContext, cat, version: str) -> dict | None:
    """The `tasks` capability a handshake-era client is told of (None: not offered, or an older revision)."""
    return dict(wire.LEGACY_CAPABILITY) if version == TASKS_REVISION and offered(ctx, cat) else None


SESSION_OWNER = "session:"  # an anonymous legacy session's tasks: the keeper ends them with it


class TaskRequests:
    """Tasks for one Session (see the module's docstring). Owns nothing but the Session's owner
    key for anonymous legacy clients (a random one: task ids outlive the session key's reuse,
    and a cluster's instances number their sessions alike). A plain object used only from its
    Session's greenlet, with explicit inputs: the context, the Session's ref, its client's view
    and handshake state, and its Forwarder (the call table and the connections)."""

    def __init__(self, ctx: SessionContext, me, view: ClientView, handshake: Handshake, forwarder: Forwarder) -> None:
        self._ctx, self._me, self._view, self._handshake, self._fw = ctx, me, view, handshake, forwarder
        self._session_owner = SESSION_OWNER + secrets.token_hex(12)
        self.watching = False  # told the keeper to tell this Session of some task's changes

    @property
    def enabled(self) -> bool:
        return self._ctx.tasks is not None

    def owner(self, sink) -> str:
        """Whose a task this caller creates is: its serve.clients name; an anonymous legacy
        client's session; nobody's for an anonymous modern caller (its id is its capability)."""
        name = self._view.client_name
        if name is not None:
            return "client:" + name
        return "" if modern.envelope_of(sink) is not None else self._session_owner

    def legacy_augments(self) -> bool:
        """A 2025-11-25 session whose client may task-augment its tools/call here."""
        return self._handshake.protocol_version == TASKS_REVISION and \
            wire.client_declares_legacy(self._handshake.client_caps) and offered(self._ctx, self._view.catalogue())

    def with_task_support(self, tools: list, cat) -> list:
        """A 2025-11-25 client's tools/list: each tool troupe can run as a task says so
        (`execution.taskSupport`): a legacy task server's tools as that server says, every other
        tool `optional` when troupe mints tasks or its server makes its own."""
        mints = self._ctx.serve.tasks.mint_after is not None
        out = []
        for tool in tools:
            entry = cat.tool(tool.get("name")) if isinstance(tool, dict) else None
            form = cat.task_forms.get(entry.server, "") if entry is not None else ""
            if entry is None or form == wire.LEGACY and wire.tool_task_support(tool) != "forbidden" \
                    or not (mints or form):
                out.append(tool)
            else:
                out.append({**tool, "execution": {**(tool.get("execution") or {}), "taskSupport": "optional"}})
        return out

    # ---------------------------------------------------------------- a tools/call

    def call(self, rid, entry: Entry, upstream: dict, params: dict, sink) -> bool:
        """Send a task-capable client's call of `entry` through the TaskKeeper; False when it is
        no task request (the caller forwards it as usual)."""
        keeper = self._ctx.tasks
        if keeper is None:
            return False
        envelope = modern.envelope_of(sink)
        if envelope is not None:
            if not wire.client_declares_modern(envelope.capabilities):
                return False
            legacy, ttl = False, None
        else:
            asked = wire.legacy_task_param(params)
            if asked is None:
                return False
            if isinstance(asked, str):
                sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, asked))
                return True
            legacy, ttl = True, asked.get("ttl")
        form = self._view.catalogue().task_forms.get(entry.server, "")
        if form == wire.LEGACY and wire.tool_task_support(entry.definition) == "forbidden":
            form = ""  # the server runs this tool only as a plain call: troupe makes the task
        mint_after = self._ctx.serve.tasks.mint_after
        if not form and mint_after is None:
            return False  # no task to be had: a plain call (2025-11-25: `task` ignored, as the spec says)
        target, _why = self._fw.connection(entry.server, sink)
        if target is None:
            return False  # the usual path says why
        if envelope is not None and getattr(sink, "retry", None) is not None:
            # A modern client's next input round (SEP-2322): its answers and the server's own state
            # go upstream as the plain path sends them; the round may end in the server's task.
            upstream = self._fw.rounds.continue_round(rid, entry.server, "tools/call", upstream, sink, tool_outcome)
            if upstream is None:
                return True  # answered there (a parked call resumed, or the retry refused)
        owner = self.owner(sink)
        view = self._ctx.servers().get(entry.server)
        max_duration = (view.config.task_max_duration if view is not None else None) or \
            self._ctx.serve.tasks.max_duration
        caps = dict(self._fw.relayed_capabilities(sink) or {})
        if form == wire.MODERN:  # the server may answer with its own task: this client takes them
            caps["extensions"] = {**(caps.get("extensions") or {}), wire.EXTENSION: {}}
        wait = self._ctx.server_timeout(entry.server) if form else (0.0 if legacy else mint_after or 0.0)
        call = self._fw.table.open(rid, sink, tool_outcome, FORWARDED, wait + DEADLINE_MARGIN)
        call.server, call.method, call.params, call.ref = entry.server, "tools/call", upstream, keeper
        if self._ctx.tracing is not None:  # its CLIENT span, as Forwarder.send opens one: its context goes on
            upstream = self._ctx.tracing.sending(call, view)
        self._fw.began(call)
        me, token = self._me, call.token

        def on_reply(outcome) -> None:  # the keeper's greenlet: a tell, nothing else
            tell(me, ForwardReplied(token, outcome))
        self._send(call, TaskCall(
            entry.server, form, upstream, target, owner, owner or getattr(sink, "principal", "") or "anonymous",
            legacy, mint_after, ttl, max_duration, caps, self._view.client_name,
            getattr(envelope, "log_level", None), on_reply, me, token))
        return True

    # ---------------------------------------------------------------- tasks/*

    def request(self, rid, params, sink, msg) -> None:
        """tasks/get, tasks/update, tasks/cancel (SEP-2663) and tasks/get, tasks/result,
        tasks/list, tasks/cancel (2025-11-25), each in its own era only."""
        method = msg["method"]
        legacy = modern.envelope_of(sink) is None
        if self._ctx.tasks is None or method not in (wire.LEGACY_METHODS if legacy else wire.MODERN_METHODS):
            why = "tasks are not offered by this troupe" if self._ctx.tasks is None else \
                "a 2026-07-28 (SEP-2663) method" if legacy else "the 2026-07-28 tasks extension has no such method"
            sink(jsonrpc.error(rid, jsonrpc.METHOD_NOT_FOUND, f"method not found: {method} ({why})"))
            return
        envelope = modern.envelope_of(sink)
        if envelope is not None and not wire.client_declares_modern(envelope.capabilities):
            # SEP-2663: a tasks/* request must itself declare the extension; checked before the
            # task id, so an undeclared caller learns what to declare, not whether an id exists.
            sink(jsonrpc.error(rid, modern.MISSING_CAPABILITY, f"{method} needs the {wire.EXTENSION} extension "
                               "declared in the request's client capabilities",
                               {"requiredCapabilities": {"extensions": {wire.EXTENSION: {}}}}))
            return
        owner = self.owner(sink)
        ref = None
        if method != "tasks/list":
            task_id = params.get("taskId")
            if not isinstance(task_id, str):
                sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"{method} needs taskId (a string)"))
                return
            ref = self._ctx.task_ids.open(task_id, owner)
            if ref is None:
                sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS,
                                   f"unknown task: no task of this client has that taskId ({method})"))
                return
        target = None if ref is None or ref.minted else self._fw.connection(ref.server, sink)[0]
        if method == "tasks/result":  # as long as the task may run: its server's max_duration, if longer
            view = self._ctx.servers().get(ref.server) if ref is not None else None
            wait = max(self._ctx.serve.tasks.max_duration,
                       (view.config.task_max_duration if view is not None else None) or 0.0)
        else:
            wait = self._ctx.server_timeout(ref.server) if ref is not None and not ref.minted else 5.0
        call = self._fw.table.open(rid, sink, passthrough(), FORWARDED, wait + DEADLINE_MARGIN)
        call.server, call.method, call.params, call.ref = ref.server if ref else "troupe", method, params, \
            self._ctx.tasks
        self._fw.began(call)
        me, token = self._me, call.token

        def on_reply(outcome) -> None:
            tell(me, ForwardReplied(token, outcome))
        self._send(call, TaskOp(method, ref, dict(params), target, owner, legacy, on_reply, me, token,
                                     self._view.client_name))

    def _send(self, call, message) -> None:
        from actors.messages import UpstreamError
        if not tell(self._ctx.tasks, message):
            self._fw.settle(call.token, UpstreamError(jsonrpc.SERVER_UNAVAILABLE, "troupe's task keeper has stopped",
                                                      server="troupe"))

    # ---------------------------------------------------------------- listen streams

    def followed(self, task_ids: Any, sink) -> list[str]:
        """The task ids a listen stream asked for that this caller may follow; the keeper is told
        to report their changes to this Session."""
        if self._ctx.tasks is None or not isinstance(task_ids, list):
            return []
        owner = self.owner(sink)
        ok = [t for t in dict.fromkeys(task_ids) if isinstance(t, str) and
              self._ctx.task_ids.open(t, owner) is not None]
        if ok:
            self.watching = True
            tell(self._ctx.tasks, WatchTasks(self._me, tuple(ok)))
        return ok
