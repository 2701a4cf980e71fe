"""The session's meta-tool dispatch: call_tool, get_resource and get_prompt reach a server;
the others answer from the catalogue snapshot (metatools.handle)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from actors.downstream import coretools, metatools
from actors.catalogue.snapshot import Catalogue
from actors.protocol import jsonrpc
from actors.downstream.replies import prompt_as_tool, resource_as_tool

if TYPE_CHECKING:
    from actors.runtime import Runtime


class MetaCalls:
    """Mixed into Session: uses its rt, _starting_up, _defer, _call and _forward."""

    if TYPE_CHECKING:  # provided by Session
        rt: Runtime

        def _starting_up(self) -> bool: ...
        def _defer(self, msg, sink) -> None: ...
        def _call(self, rid, entry, args, params, sink) -> None: ...
        def _forward(self, rid, server: str, method: str, params: dict, sink, shape, progress_token=None,
                     retry: bool | None = None) -> None: ...

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
                self._forward(rid, owner[0], "resources/read", {"uri": owner[1]}, sink, resource_as_tool)
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
                core = coretools.listed(self.rt.config.serve.client_admin)
                sink(jsonrpc.result(rid, metatools.handle(name, args, cat, core)))
        except metatools.MetaError as exc:
            sink(jsonrpc.result(rid, metatools.text_result(f"{name}: {exc}", is_error=True)))

