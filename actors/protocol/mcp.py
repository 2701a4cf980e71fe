"""MCP constants: protocol versions, method names troupe cares about, its own identity."""
from __future__ import annotations

from actors import __version__

LATEST = "2025-11-25"
# Newest first: the versions troupe speaks on both sides (the legacy, session era).
SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# The stateless revision (2026-07-28, "modern"): no initialize, state travels in each request's _meta.
MODERN = "2026-07-28"
MODERN_VERSIONS = (MODERN,)
CLIENT_INFO = {"name": "troupe", "version": __version__}
SERVER_INFO = {"name": "troupe", "title": "troupe MCP aggregator", "version": __version__}

# logging/setLevel's levels, least to most severe (RFC 5424 order).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# Server→client requests troupe relays, and the client capability each one needs.
RELAYED_REQUESTS = {"sampling/createMessage": "sampling", "elicitation/create": "elicitation",
                    "roots/list": "roots"}
RELAY_CAPABILITIES = tuple(dict.fromkeys(RELAYED_REQUESTS.values()))
# MCP Apps (SEP-1865): a tool's `_meta.ui.resourceUri` names a `ui://` HTML resource of its server
# that the host renders. troupe carries both (the URI rewritten where it serves the resource under
# another, see catalogue/apps.py), so it declares the extension, with the one MIME type the spec
# defines, to every upstream; a client's own declaration is relayed in its modern requests.
UI_EXTENSION = "io.modelcontextprotocol/ui"
UI_MIME_TYPE = "text/html;profile=mcp-app"
# Tasks (SEP-2663): relayed only on the calls troupe sends through its TaskKeeper, which seals the
# server's task ids (actors/tasks); every other call goes without it (Forwarder.relayed_capabilities).
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK = "io.modelcontextprotocol/related-task"  # 2025-11-25: the `_meta` key tying a message to its task
# Client extensions troupe relays upstream as the client declared them (what it carries for them).
RELAYED_EXTENSIONS = (UI_EXTENSION, TASKS_EXTENSION)
# Server extensions troupe itself carries for its clients, whatever its upstreams declare.
SERVED_EXTENSIONS = {UI_EXTENSION: {}}

# What troupe backs for a client in a (legacy) session; modern.capabilities() is the stateless set.
SESSION_CAPABILITIES = {"tools": {"listChanged": True}, "resources": {"listChanged": True, "subscribe": True},
                        "prompts": {"listChanged": True}, "logging": {}, "completions": {},
                        "extensions": SERVED_EXTENSIONS}
# What troupe declares to every upstream, in its initialize and in the capabilities envelope of
# its own modern requests: all it can relay, whichever client connects first, so that a server
# lists the same tools (and its pin does not depend on who came first). A question no current
# client can take is refused upstream with an error naming the capability. Roots changes are
# relayed (a client's notifications/roots/list_changed goes to every upstream); elicitation is
# form mode and sampling without tools, the forms every client with the capability takes.
# The apps extension is in the set too: a server may list its app tools (or their `_meta.ui`) only
# to a host that declares it, and one list serves every client; a client without apps is not
# shown the tools meant for the app alone (`visibility: ["app"]`, catalogue/apps.py), and any
# other app tool is a plain tool to it, as the spec's text-only fallback says.
def relayed_client_capabilities() -> dict:
    """A fresh copy each call: the caller may put it in a message it sends."""
    return {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {},
            "extensions": {UI_EXTENSION: {"mimeTypes": [UI_MIME_TYPE]}}}

LIST_METHODS = {
    "tools": ("tools/list", "tools"),
    "resources": ("resources/list", "resources"),
    "templates": ("resources/templates/list", "resourceTemplates"),
    "prompts": ("prompts/list", "prompts"),
}
# Which capability an upstream must declare before troupe lists a kind.
LIST_CAPABILITY = {"tools": "tools", "resources": "resources", "templates": "resources", "prompts": "prompts"}
LIST_CHANGED = {
    "notifications/tools/list_changed": ("tools",),
    "notifications/resources/list_changed": ("resources", "templates"),
    "notifications/prompts/list_changed": ("prompts",),
}


def negotiate(requested: str | None) -> str:
    """The client's version if troupe speaks it, else troupe's newest (the spec's rule)."""
    return requested if requested in SUPPORTED_VERSIONS else LATEST
