"""The session's tool requests: tools/list, tools/call (core, meta and server tools) and the
meta-tool dispatch, where call_tool, get_resource and get_prompt reach a server and the others
answer from the catalogue snapshot (metatools.handle)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from loguru import logger

from actors.catalogue import apps
from actors.catalogue.snapshot import Catalogue
from actors.downstream import coretools, metatools
from actors.downstream.calls import CallDone
from actors.downstream.replies import (paged, passthrough, plain_tool_outcome, prompt_as_tool, resource_as_tool,
                                      restore_uris)
from actors.messages import UpstreamError
from actors.protocol import jsonrpc, modern, validation
from actors.tells import tell
from actors.workflows.tools import WORKFLOWS_SERVER

if TYPE_CHECKING:
    from actors.caching.session_side import CacheSide
    from actors.downstream.client_view import ClientView
    from actors.downstream.context import SessionContext
    from actors.downstream.forwarder import Forwarder
    from actors.downstream.lifecycle import Handshake
    from actors.tasks.session_side import TaskRequests
    from actors.workflows.session_calls import WorkflowRequests

CORE_DEADLINE = 30.0  # a core tool answers from troupe's own state: anything slower is a fault


class ToolRequests:
    """A Session's tool requests: tools/list, tools/call (core, meta and server tools) and the
    meta-tool dispatch. No state of its own. A plain object used only from its Session's greenlet,
    with explicit inputs: the context, the Session's ref and mode, its client's view and handshake
    state, its Forwarder (forwarded, tracked and deferred calls), its cache side and its
    workflow runs."""

    def __init__(self, ctx: SessionContext, me, mode: str, view: ClientView, handshake: Handshake,
                 forwarder: Forwarder, cache: CacheSide, workflows: WorkflowRequests, tasks: TaskRequests) -> None:
        self._ctx, self._me, self._mode, self._view, self._handshake = ctx, me, mode, view, handshake
        self._fw, self._cache, self._workflows, self._tasks = forwarder, cache, workflows, tasks
        self._own: metatools.OwnTools | None = None  # the core tools as the meta-tools show them, once asked

    def tools_list(self, rid, params, sink, msg) -> None:
        if self._fw.starting_up():
            self._fw.defer(msg, sink)
            return
        cat = self._view.catalogue()
        legacy = modern.envelope_of(sink) is None
        if self._mode == "meta":  # exactly the meta-tools: everything else is reached through them
            paged(rid, params, sink, list(metatools.META_TOOLS), "tools", cat, (self._mode, ()))
            return  # and no list_changed for them: they never change
        # each era's client its own era's definitions (eras), built once per snapshot
        tools = list(cat.legacy_tool_list if legacy else cat.modern_tool_list)
        if legacy and self._tasks.legacy_augments():  # a 2025-11-25 client hears which tools run as tasks
            tools = self._tasks.with_task_support(tools, cat)
        # A tool meant for an MCP App alone goes only to a host that takes apps (it keeps such
        # tools from its model and lets its app call them); to any other client it would be one
        # more tool for the model, which its server would not have listed to such a client.
        apps_host = apps.takes_apps(self._fw.relayed_capabilities(sink))
        if cat.app_only and not apps_host:
            tools = [t for t in tools if t.get("name") not in cat.app_only]
        core = self._core_tools()
        # The cursor's digest: the view's tools (built with the snapshot) and what else is listed.
        # and a list that depends on what the caller declared is no list for a cache to share
        private = {"cacheScope": "private"} if cat.app_only and not legacy else None
        if paged(rid, params, sink, tools + core, "tools", cat,
                 (self._mode, tuple(t["name"] for t in core), apps_host or not cat.app_only), private) \
                and legacy:  # a modern request leaves nothing behind
            self._handshake.served("tools", cat)

    def _core_tools(self) -> list[dict]:
        """The core tools this client sees: flat mode lists them, meta mode's listing meta-tools show them."""
        return [t for t in coretools.listed(self._ctx.serve.client_admin) if self._view.sees_core(t)]

    def tools_call(self, rid, params, sink, msg) -> None:
        name, args = params.get("name"), params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(name, str):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "tools/call needs a tool name"))
            return
        if not isinstance(args, dict):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"arguments of {name} must be an object"))
            return
        # Meta mode lists core tools through the meta-tools only (call_tool runs them), yet a direct
        # call by name, as a script or an operator makes it, is still answered, in either mode.
        if name in coretools.CORE_NAMES and self._view.sees_core(coretools.BY_NAME[name]):
            self._core(rid, name, args, sink)
            return
        cat = self._view.catalogue()
        if self._mode == "meta" and name in metatools.META_NAMES:
            self._meta(rid, name, args, params, sink, cat, msg)
            return
        entry = cat.tool(name) if self._mode == "flat" else None
        held = cat.withheld_tool(name) if entry is None and self._mode == "flat" else None
        if held is not None:  # never passed through: the changed definition is exactly what waits
            sink(jsonrpc.result(rid, metatools.text_result(held.message(), is_error=True)))
            return
        if entry is None and self._fw.starting_up():
            self._fw.defer(msg, sink)  # its server may still be starting
            return
        if entry is None and name in coretools.RESERVED_NAMES:  # troupe's own name: never passed through
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, _reserved_message(name, self._mode, cat)))
            return
        bare = self._view.passthrough_server() if entry is None and self._mode == "flat" else None
        if bare is not None:
            self._fw.forward(rid, bare, "tools/call", params, sink, passthrough())
            return
        if entry is None:
            hint = "meta mode: find tools with list_tools or filter_tools and run them with call_tool" \
                if self._mode == "meta" else "see tools/list"
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"unknown tool: {name} ({hint})"))
            return
        self._call(rid, entry, args, params, sink)

    def _core(self, rid, name: str, args: dict, sink) -> None:
        """A core_* tool: run (it may block on the runtime's asks) in a greenlet the call table
        tracks, so a cancel or the client's leaving stops it and its answer goes out once."""
        # core_workflow_* answer about this client's view
        run_core, view, me, client = self._ctx.run_core, self._view.catalogue(), self._me, self._view.client_name

        def work(token: int) -> None:
            try:
                outcome = run_core(name, args, view, client)
            except Exception as exc:  # a bug in a core tool answers its call, nothing else
                logger.exception("core tool {} failed", name)
                outcome = UpstreamError(jsonrpc.INTERNAL_ERROR, f"troupe internal error in {name}: {exc}",
                                        server="troupe")
            tell(me, CallDone(token, outcome))
        self._fw.track(rid, sink, passthrough(), work, CORE_DEADLINE, method=name, audited=("troupe", name, args))

    def _call(self, rid, entry, args, params, sink) -> None:
        problem = validation.problems(self._view.catalogue().validator(entry), args)
        if problem is not None:  # caught here, the model gets a precise reason and no server is bothered
            sink(jsonrpc.result(rid, metatools.text_result(
                f"invalid arguments for {entry.name}: {problem}. describe_tool shows its schema."
                if self._mode == "meta" else f"invalid arguments for {entry.name}: {problem}", is_error=True)))
            return
        if entry.server == WORKFLOWS_SERVER:  # troupe runs it, each step through this same Session
            self._workflows.run(rid, entry, args, params, sink)
            return
        upstream = {"name": entry.original, "arguments": args}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(meta, dict):
            upstream["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
        retry = bool((entry.definition.get("annotations") or {}).get("idempotentHint")) and \
            self._ctx.retry_tools(entry.server)
        if not self._fw.admit(rid, entry.server, "tools/call", sink, upstream):  # past a rate limit: refused now
            return
        plan = self._cache.tool_plan(entry.server, entry.original, entry.definition, args)  # None: not cached
        if plan is None and self._tasks.call(rid, entry, upstream, params, sink):
            return  # a task-capable client's call: the TaskKeeper answers it (a task, or the result)
        self._cache.forward(plan, rid, entry.server, "tools/call", upstream, sink, plain_tool_outcome, token,
                            retry=retry, admitted=True)

    def _meta(self, rid, name, args, params, sink, cat: Catalogue, msg) -> None:
        if name != "list_core_tools" and name != "call_tool" and self._fw.starting_up():
            self._fw.defer(msg, sink)  # like tools/list: the first look waits for start-up to settle
            return
        try:
            if name == "call_tool":
                target = args.get("name")
                inner = args.get("arguments")
                if not isinstance(target, str) or not target:
                    raise metatools.MetaError("call_tool needs 'name' (a qualified tool name from list_tools)")
                if inner is None:
                    inner = {}
                if not isinstance(inner, dict):
                    raise metatools.MetaError(f"'arguments' for {target} must be an object")
                entry = cat.tool(target)
                if entry is None and target in coretools.CORE_NAMES and self._view.sees_core(coretools.BY_NAME[target]):
                    self._core(rid, target, inner, sink)  # troupe's own: no server's tool has its name
                    return
                if entry is None and target in metatools.META_NAMES:
                    raise metatools.MetaError(f"{target} is one of troupe's meta-tools: call it directly")
                held = cat.withheld_tool(target) if entry is None else None
                if held is not None:
                    raise metatools.MetaError(held.message())
                if entry is None and self._fw.starting_up():
                    self._fw.defer(msg, sink)  # its server may still be starting
                    return
                if entry is None:
                    raise metatools.MetaError(f"unknown tool {target!r}; use filter_tools or list_tools to find names")
                self._call(rid, entry, inner, params, sink)
            elif name == "get_resource":
                uri = metatools._required_str(args, "uri")
                owner = cat.resource_owner(uri)
                if owner is None:
                    raise metatools.MetaError(f"unknown resource {uri!r}; use list_resources to find URIs")
                plan = self._cache.resource_plan(*owner)
                self._cache.forward(plan, rid, owner[0], "resources/read", {"uri": owner[1]}, sink,
                                    _resource_under(owner[1], uri))
            elif name == "get_prompt":
                pname = metatools._required_str(args, "name")
                entry = cat.prompt(pname)
                held = cat.withheld_prompt(pname) if entry is None else None
                if held is not None:
                    raise metatools.MetaError(held.message())
                if entry is None:
                    raise metatools.MetaError(f"unknown prompt {pname!r}; use list_prompts to find names")
                pargs = args.get("arguments") or {}
                self._fw.forward(rid, entry.server, "prompts/get", {"name": entry.original, "arguments": pargs},
                              sink, prompt_as_tool)
            else:
                if self._own is None:
                    self._own = metatools.OwnTools.of(self._core_tools())
                own = self._own
                waiting = self._view.sign_ins_in_view() if name == "list_tools" else ()
                sink(jsonrpc.result(rid, metatools.handle(name, args, cat, own, waiting)))
        except metatools.MetaError as exc:
            sink(jsonrpc.result(rid, metatools.text_result(f"{name}: {exc}", is_error=True)))


def _resource_under(original: str, exposed: str):
    """get_resource's answer shape: the contents as a tool result, under the URI the client asked
    for (an MCP App view troupe serves under a URI of its own says that one, as resources/read)."""
    def shape(rid, outcome):
        if isinstance(outcome, dict):
            outcome = restore_uris(outcome, original, exposed)
        return resource_as_tool(rid, outcome)
    return shape


def _reserved_message(name: str, mode: str, cat: Catalogue) -> str:
    """Why troupe's own name did not reach a tool here, and where a server's tool of that name went."""
    what = "one of troupe's meta-tools, served in meta mode" if name in metatools.META_NAMES and mode == "flat" \
        else "not available to this client"
    # Only on this error path: the entries a reserved name was taken from (renamed by catalogue.build).
    renamed = [e.name for e in cat.tools if e.original == name and e.name != name]
    hint = f"; a server's tool of that name is listed as {', '.join(renamed)}" if renamed else ""
    return f"unknown tool: {name} is {what}{hint}"
