"""troupe's own core_* tools; handlers run in their own greenlet (edge code may wait)."""
from __future__ import annotations

from typing import Any, Callable

from actors.ops import acts
from actors.downstream.metatools import META_NAMES, MetaError, _tool, text_result
from actors.trust import provenance as trust
from actors.workflows import tools as workflow_tools

_NAME = {"name": {"type": "string", "description": "Server name, as core_mcpserver_list shows it."}}

CORE_TOOLS = (
    _tool("core_status", "troupe's status report: overall readiness, uptime and every server's state, "
          "restarts, last error, tool counts, in-flight calls and latency.", {}),
    _tool("core_mcpserver_list", "List every MCP server troupe knows, with its state and counts.", {}),
    _tool("core_mcpserver_get", "Show one MCP server's status and launch facts (never secrets).", _NAME, ("name",)),
    _tool("core_service_restart", "Restart one MCP server now (also closes an open circuit).", _NAME, ("name",),
          read_only=False),
    _tool("core_service_stop", "Stop one MCP server (it stays stopped until started).", _NAME, ("name",),
          read_only=False),
    _tool("core_service_start", "Start a stopped MCP server.", _NAME, ("name",), read_only=False),
    _tool("core_mcpserver_register", "Propose an MCP server to troupe (persisted). It is not started: it waits "
          "in state pending-approval until the operator runs `troupe approve NAME`. "
          "Give a name plus either command/args/env (stdio) or url/type/headers (http).",
          {"name": {"type": "string"}, "command": {"type": "string"},
           "args": {"type": "array", "items": {"type": "string"}},
           "env": {"type": "object", "additionalProperties": {"type": "string"}}, "url": {"type": "string"},
           "type": {"type": "string", "enum": ["stdio", "sse", "http", "streamable-http"]},
           "headers": {"type": "object", "additionalProperties": {"type": "string"}}}, ("name",), read_only=False),
    _tool("core_mcpserver_unregister", "Remove a server registered with core_mcpserver_register.", _NAME, ("name",),
          read_only=False),
    _tool("core_discovery_run", "Run server discovery now (client config files, PATH) and report what was found.",
          {}, read_only=False),
    _tool("core_health_check", "Probe the health of one discovered server, or all when no name is given.",
          {"name": {"type": "string"}}),
    _tool("core_events", "Recent troupe events (state changes, restarts, discovery), newest last.",
          {"limit": {"type": "integer", "minimum": 1, "maximum": 500}}),
) + workflow_tools.CORE_TOOLS
CORE_NAMES = frozenset(t["name"] for t in CORE_TOOLS)
BY_NAME = {t["name"]: t for t in CORE_TOOLS}
# troupe's own tool names, in either mode and whatever the operator's config: the Registry renames
# a server's tool that would take one (catalogue.build), and flat mode never passes one through.
RESERVED_NAMES = META_NAMES | CORE_NAMES
# Operator acts a model must not take unless the operator says so (serve.client_admin: true):
# a client of the MCP endpoint may be steered by a prompt injection.
ADMIN_TOOLS = frozenset({"core_service_restart", "core_service_stop", "core_service_start",
                         "core_mcpserver_unregister"})
CLIENT_TOOLS = tuple(t for t in CORE_TOOLS if t["name"] not in ADMIN_TOOLS)


def listed(client_admin: bool) -> tuple:
    """The core tools an MCP client sees."""
    return CORE_TOOLS if client_admin else CLIENT_TOOLS


def _name(args: dict) -> str:
    name = args.get("name")
    if not isinstance(name, str) or not name:
        raise MetaError("argument 'name' is required (a server name; see core_mcpserver_list)")
    return name


def _server(runtime, args) -> dict:
    name = _name(args)
    for s in runtime.status()["servers"]:
        if s["name"] == name:
            return s
    raise MetaError(f"unknown server {name!r}; core_mcpserver_list shows the names")


def _control(action: str) -> Callable:
    def run(runtime, args):
        try:
            return runtime.control(action, _name(args))
        except KeyError as exc:
            raise MetaError(str(exc.args[0]) + "; core_mcpserver_list shows the names") from None
    return run


def _register(runtime, args) -> dict:
    entry = runtime.register_server(dict(args))
    name = entry.get("name", args.get("name")) if isinstance(entry, dict) else args.get("name")
    command = trust.approve_hint(name, runtime.approve_config)
    return {"registered": entry, "state": "pending-approval",
            "next": f"nothing runs until the operator approves it: `{command}` "
                    f"(or the dashboard); `troupe approvals` lists what waits"}


def _events(runtime, args):
    limit = args.get("limit", 50)
    if not isinstance(limit, int) or not 1 <= limit <= 500:
        raise MetaError("limit must be an integer 1..500")
    return {"events": runtime.events(limit)}


HANDLERS: dict[str, Callable[[Any, dict], Any]] = {
    "core_status": lambda runtime, args: runtime.status(),
    "core_mcpserver_list": lambda runtime, args: {"servers": [
        {k: s[k] for k in ("name", "state", "transport", "source", "tools", "restarts", "last_error")}
        for s in runtime.status()["servers"]]},
    "core_mcpserver_get": _server,
    "core_service_restart": _control("restart"),
    "core_service_stop": _control("stop"),
    "core_service_start": _control("start"),
    "core_mcpserver_register": lambda runtime, args: _register(runtime, args),
    "core_mcpserver_unregister": lambda runtime, args: {"removed": runtime.unregister_server(_name(args))},
    "core_discovery_run": lambda runtime, args: runtime.discovery_run(),
    "core_health_check": lambda runtime, args: runtime.health_check(args.get("name")),
    "core_events": _events,
}


_ACTS = {"core_service_restart": "restart", "core_service_stop": "stop", "core_service_start": "start"}


def run(name: str, args: dict, runtime, view=None, client: str | None = None) -> dict:
    """Blocking: call from a greenlet, never from an actor's own greenlet. `view`: the calling
    client's catalogue (the workflow tools answer about what that client can call); `client`: its
    serve.clients name (who did an operator act, in the audit trail)."""
    if name in ADMIN_TOOLS and not runtime.config.serve.client_admin:
        return text_result(f"{name} is off for MCP clients: stopping, starting and removing servers is an "
                           f"operator act (the dashboard, `troupe` commands), unless the operator sets "
                           f"serve.client_admin: true", is_error=True)
    try:
        if name in workflow_tools.CORE_NAMES:
            return text_result(workflow_tools.run_core(name, args, runtime.workflows.current,
                                                       view if view is not None else runtime.catalogue()))
        result = text_result(HANDLERS[name](runtime, args))
        if name in _ACTS:  # an operator act done by an MCP client: in the audit trail, with who did it
            acts.record(runtime.observer, _ACTS[name], str(args.get("name")), client, acts.MCP)
        return result
    except MetaError as exc:
        return text_result(f"{name}: {exc}", is_error=True)
    except Exception as exc:  # a failing control path is an answer, not a hang
        return text_result(f"{name} failed: {type(exc).__name__}: {exc}", is_error=True)
