"""The session's tool requests: tools/list, tools/call (core, meta and server tools) and the
meta-tool dispatch, where call_tool, get_resource and get_prompt reach a server and the others
answer from the catalogue snapshot (metatools.handle)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import gevent

from actors.catalogue.snapshot import Catalogue
from actors.downstream import coretools, metatools
from actors.downstream.replies import passthrough, prompt_as_tool, resource_as_tool, tool_outcome
from actors.protocol import jsonrpc, modern, validation
from actors.workflows.tools import WORKFLOWS_SERVER

if TYPE_CHECKING:
    from actors.runtime import Runtime


class ToolCalls:
    """Mixed into Session: the handlers of its tool requests; they keep no state of their own and
    use its rt, mode, _served_version, _starting_up, _defer, _paged and _forward."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime
        mode: str
        _served_version: dict[str, int]

        def _starting_up(self) -> bool: ...
        def _defer(self, msg, sink) -> None: ...
        def catalogue(self) -> Catalogue: ...
        def passthrough_server(self) -> str | None: ...
        def sees_core(self, tool: dict) -> bool: ...
        def sign_ins_in_view(self) -> list[dict]: ...
        def _paged(self, rid, params, sink, items, key, cat: Catalogue, variant=()) -> None: ...
        def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                     retry: bool | None = None) -> None: ...
        def _run_workflow(self, rid, entry, args: dict, params: dict, sink) -> None: ...
        def _forward_cached(self, plan, rid, server: str, method: str, params: dict, sink, shape,
                            progress_token=None, retry: bool | None = None) -> None: ...
        def tool_plan(self, server: str, tool: str, definition, arguments: dict): ...
        def resource_plan(self, server: str, uri: str): ...

    def _tools_list(self, rid, params, sink, msg) -> None:
        if self._starting_up():
            self._defer(msg, sink)
            return
        cat = self.catalogue()
        if modern.envelope_of(sink) is None:  # a modern request leaves nothing behind
            self._served_version["tools"] = cat.version
        admin = self.rt.config.serve.client_admin
        tools = list(metatools.META_TOOLS) if self.mode == "meta" else list(cat.tool_list)
        core = [t for t in coretools.listed(admin) if self.sees_core(t)]
        # The cursor's digest: the view's tools (built with the snapshot) and what else is listed.
        self._paged(rid, params, sink, tools + core, "tools", cat, (self.mode, tuple(t["name"] for t in core)))

    def _tools_call(self, rid, params, sink, msg) -> None:
        name, args = params.get("name"), params.get("arguments")
        if args is None:
            args = {}
        if not isinstance(name, str):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, "tools/call needs a tool name"))
            return
        if not isinstance(args, dict):
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"arguments of {name} must be an object"))
            return
        if name in coretools.CORE_NAMES and self.sees_core(coretools.BY_NAME[name]):
            rt, view = self.rt, self.catalogue()  # core_workflow_* answer about this client's view
            gevent.spawn(lambda: sink(jsonrpc.result(rid, coretools.run(name, args, rt, view))))
            return
        cat = self.catalogue()
        if self.mode == "meta" and name in metatools.META_NAMES:
            self._meta(rid, name, args, params, sink, cat, msg)
            return
        entry = cat.tool(name) if self.mode == "flat" else None
        held = cat.withheld_tool(name) if entry is None and self.mode == "flat" else None
        if held is not None:  # never passed through: the changed definition is exactly what waits
            sink(jsonrpc.result(rid, metatools.text_result(held.message(), is_error=True)))
            return
        if entry is None and self._starting_up():
            self._defer(msg, sink)  # its server may still be starting
            return
        bare = self.passthrough_server() if entry is None and self.mode == "flat" else None
        if bare is not None:
            self._forward(rid, bare, "tools/call", params, sink, passthrough())
            return
        if entry is None:
            hint = "list_tools or filter_tools" if self.mode == "meta" else "tools/list"
            sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, f"unknown tool: {name} (see {hint})"))
            return
        self._call(rid, entry, args, params, sink)

    def _call(self, rid, entry, args, params, sink) -> None:
        problem = validation.problems(self.catalogue().validator(entry), args)
        if problem is not None:  # caught here, the model gets a precise reason and no server is bothered
            sink(jsonrpc.result(rid, metatools.text_result(
                f"invalid arguments for {entry.name}: {problem}. describe_tool shows its schema."
                if self.mode == "meta" else f"invalid arguments for {entry.name}: {problem}", is_error=True)))
            return
        if entry.server == WORKFLOWS_SERVER:  # troupe runs it, each step through this same Session
            self._run_workflow(rid, entry, args, params, sink)
            return
        upstream = {"name": entry.original, "arguments": args}
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(meta, dict):
            upstream["_meta"] = {k: v for k, v in meta.items() if k != "progressToken"}
        retry = bool((entry.definition.get("annotations") or {}).get("idempotentHint")) and \
            self.rt.retry_tools(entry.server)
        plan = self.tool_plan(entry.server, entry.original, entry.definition, args)  # None: not cached
        self._forward_cached(plan, rid, entry.server, "tools/call", upstream, sink, tool_outcome, token, retry=retry)

    def _meta(self, rid, name, args, params, sink, cat: Catalogue, msg) -> None:
        if name != "list_core_tools" and name != "call_tool" and self._starting_up():
            self._defer(msg, sink)  # like tools/list: the first look waits for start-up to settle
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
                held = cat.withheld_tool(target) if entry is None else None
                if held is not None:
                    raise metatools.MetaError(held.message())
                if entry is None and self._starting_up():
                    self._defer(msg, sink)  # its server may still be starting
                    return
                if entry is None:
                    raise metatools.MetaError(f"unknown tool {target!r}; use filter_tools or list_tools to find names")
                self._call(rid, entry, inner, params, sink)
            elif name == "get_resource":
                uri = metatools._required_str(args, "uri")
                owner = cat.resource_owner(uri)
                if owner is None:
                    raise metatools.MetaError(f"unknown resource {uri!r}; use list_resources to find URIs")
                self._forward_cached(self.resource_plan(*owner), rid, owner[0], "resources/read", {"uri": owner[1]},
                                     sink, resource_as_tool)
            elif name == "get_prompt":
                pname = metatools._required_str(args, "name")
                entry = cat.prompt(pname)
                held = cat.withheld_prompt(pname) if entry is None else None
                if held is not None:
                    raise metatools.MetaError(held.message())
                if entry is None:
                    raise metatools.MetaError(f"unknown prompt {pname!r}; use list_prompts to find names")
                pargs = args.get("arguments") or {}
                self._forward(rid, entry.server, "prompts/get", {"name": entry.original, "arguments": pargs},
                              sink, prompt_as_tool)
            else:
                core = tuple(t for t in coretools.listed(self.rt.config.serve.client_admin) if self.sees_core(t))
                waiting = self.sign_ins_in_view() if name == "list_tools" else ()
                sink(jsonrpc.result(rid, metatools.handle(name, args, cat, core, waiting)))
        except metatools.MetaError as exc:
            sink(jsonrpc.result(rid, metatools.text_result(f"{name}: {exc}", is_error=True)))

