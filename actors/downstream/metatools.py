"""The 11 meta-tools: definitions and the handlers that read a Catalogue snapshot."""
from __future__ import annotations

import fnmatch
import heapq
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import orjson

from actors.catalogue.snapshot import Catalogue, Entry
from actors.catalogue.search import Index, bag, fields

DEFAULT_LIMIT = 50
MAX_LIMIT = 1000

_PAGE = {"limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                   "description": f"Page size (default {DEFAULT_LIMIT})."},
         "offset": {"type": "integer", "minimum": 0, "description": "Entries to skip (default 0)."}}


def _tool(name: str, description: str, properties: dict, required: tuple = (), read_only: bool = True) -> dict:
    return {"name": name, "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": list(required),
                            "additionalProperties": False},
            "annotations": {"readOnlyHint": read_only, "openWorldHint": not read_only}}


# What every listing meta-tool says of troupe's own tools: the model finds them where it finds
# any tool, and calls them the same way.
_OWN = ("troupe's own tools (core_*: status, servers, events, workflows) are listed last, with server "
        "\"(troupe)\"")

META_TOOLS = (
    _tool("list_tools", "List every tool you can call with call_tool: the tools of every connected MCP server "
          "(name, server, first sentence of the description), a page at a time; workflows (workflow_*) have "
          f"server \"(workflows)\" and {_OWN}. Returns JSON with tools, total, limit, offset and truncated; "
          "describe_tool gives a tool's whole definition.", dict(_PAGE)),
    _tool("describe_tool", "Show one tool's full definition: description, input schema and an example "
          "call_tool invocation. Works for any name list_tools or filter_tools shows, troupe's own core_* "
          "tools included.",
          {"name": {"type": "string", "description": "Qualified tool name from list_tools."}}, ("name",)),
    _tool("filter_tools", "Find tools by relevance to a query (words matched in tool names, descriptions, parameters "
          "and server names; a whole task in plain words works), "
          "or by a name glob pattern and/or server. Returns JSON like list_tools, best match first; "
          "troupe's own core_* tools are searched too (server \"(troupe)\").",
          {"query": {"type": "string", "description": "Words describing what you need."},
           "pattern": {"type": "string", "description": "Glob on the qualified name, e.g. 'github__*'."},
           "server": {"type": "string", "description": "Only tools of this server (\"(troupe)\": troupe's own)."},
           "description_filter": {"type": "string", "description": "Substring that must appear in the description."},
           "case_sensitive": {"type": "boolean"}, **_PAGE}),
    _tool("list_core_tools", "List troupe's own core_* tools (status, server management, events, workflows) with "
          "their descriptions. They are not in tools/list: run one with call_tool {name, arguments}.", {}),
    _tool("call_tool", "Call a tool by its qualified name with its arguments; returns the tool's own result unchanged. "
          "Every tool list_tools, filter_tools or list_core_tools shows is called this way: a server's tool, a "
          "workflow (workflow_*) or troupe's own (core_*, e.g. core_status).",
          {"name": {"type": "string", "description": "Qualified tool name."},
           "arguments": {"type": "object", "description": "The tool's arguments, as its input schema says."}},
          ("name",), read_only=False),
    _tool("list_resources", "List the resources of every connected server (uri, name, server, mimeType).", dict(_PAGE)),
    _tool("describe_resource", "Show one resource's metadata.", {"uri": {"type": "string"}}, ("uri",)),
    _tool("get_resource", "Read a resource's contents by URI.", {"uri": {"type": "string"}}, ("uri",)),
    _tool("list_prompts", "List the prompts of every connected server with their arguments.", dict(_PAGE)),
    _tool("describe_prompt", "Show one prompt's description and arguments.", {"name": {"type": "string"}}, ("name",)),
    _tool("get_prompt", "Render a prompt with its arguments; returns its messages as JSON.",
          {"name": {"type": "string"}, "arguments": {"type": "object", "additionalProperties": {"type": "string"}}},
          ("name",)),
)
META_NAMES = frozenset(t["name"] for t in META_TOOLS)
FORWARDING = frozenset({"call_tool", "get_resource", "get_prompt"})  # these reach a server


class MetaError(Exception):
    """Bad meta-tool arguments: becomes an isError result the model can act on."""


def text_result(value: Any, is_error: bool = False) -> dict:
    text = value if isinstance(value, str) else orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()
    out: dict = {"content": [{"type": "text", "text": text}]}
    if is_error:
        out["isError"] = True
    return out


def _compact(value: dict) -> dict:
    """Tool lists are what a model pays for on every search: no indentation."""
    return text_result(orjson.dumps(value).decode())


def _page(args: dict) -> tuple[int, int]:
    limit, offset = args.get("limit", DEFAULT_LIMIT), args.get("offset", 0)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise MetaError(f"limit must be an integer 1..{MAX_LIMIT}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise MetaError("offset must be an integer >= 0")
    return limit, offset


def _paged(key: str, items: list, limit: int, offset: int) -> dict:
    page = items[offset:offset + limit]
    return {key: page, "total": len(items), "limit": limit, "offset": offset,
            "truncated": offset + len(page) < len(items)}


_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n\s*\n")
BRIEF_CHARS = 160  # a list answer's description: enough to choose a tool; describe_tool has the rest


def brief(text: str) -> str:
    """A description's first sentence (or paragraph), cut at a word within BRIEF_CHARS."""
    text = (text or "").strip()
    text = " ".join(_SENTENCE_END.split(text, maxsplit=1)[0].split())
    if len(text) <= BRIEF_CHARS:
        return text
    cut = text[:BRIEF_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(",;:") + "…"


def _tool_summary(e: Entry) -> dict:
    d = e.definition
    out = {"name": e.name, "server": e.server, "description": brief(d.get("description", ""))}
    if d.get("title"):
        out["title"] = d["title"]
    return out


def _required_str(args: dict, key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value:
        raise MetaError(f"argument {key!r} is required (a non-empty string)")
    return value


def _index(cat: Catalogue) -> Index:
    """The snapshot's own search index (a lazy attribute of the snapshot: built on first use)."""
    return cat.search_index


def example_arguments(schema: dict) -> dict:
    """A plausible arguments object from a schema's required properties (for describe_tool)."""
    props = (schema or {}).get("properties") or {}
    samples: dict[Any, Any] = {"string": "text", "integer": 1, "number": 1.5, "boolean": True, "array": [],
                               "object": {}}
    out = {}
    for key in (schema or {}).get("required") or list(props)[:2]:
        prop = props.get(key) or {}
        if "default" in prop:
            out[key] = prop["default"]
        elif prop.get("enum"):
            out[key] = prop["enum"][0]
        else:
            kind = prop.get("type")
            out[key] = samples.get(kind[0] if isinstance(kind, list) else kind, "value")
    return out


# The server troupe's own tools name: no server can have it (server names start with a letter or digit).
OWN_SERVER = "(troupe)"


@dataclass(frozen=True, slots=True)
class OwnTools:
    """troupe's own tools one client sees, as entries of OWN_SERVER (listed and searched like any
    tool, after the catalogue's), with each one's search words. Which they are is fixed for a
    Session's life, so its ToolRequests builds this once (`of`) and keeps it."""

    entries: tuple = ()
    bags: tuple = ()  # search.bag of each entry's fields, in the same order

    @classmethod
    def of(cls, core_tools) -> "OwnTools":
        entries = tuple(Entry(t["name"], OWN_SERVER, t["name"], MappingProxyType(t)) for t in core_tools)
        return cls(entries, tuple(bag(fields(e)) for e in entries))


NO_OWN = OwnTools()


def handle(name: str, args: dict, cat: Catalogue, own: OwnTools = NO_OWN, needs_auth: tuple | list = ()) -> dict:
    """Answer a non-forwarding meta-tool from the snapshot alone. `own`: troupe's own tools this
    client sees, listed and searched after the catalogue's tools. list_tools also names the servers
    waiting for an OAuth sign-in (`needs_auth`: [{name, auth_url}]): their tools cannot be called now."""
    if name == "list_tools":
        limit, offset = _page(args)
        tools = _model_tools(cat)
        listed = _paged_summaries(_Then(tools, own.entries), len(tools) + len(own.entries), limit, offset)
        if needs_auth:
            listed["needs_authentication"] = list(needs_auth)
        return _compact(listed)
    if name == "describe_tool":
        tool_name = _required_str(args, "name")
        entry = cat.tool(tool_name)
        if entry is None:
            return _describe_own(tool_name, own.entries)
        d = dict(entry.definition)
        example = {"name": "call_tool", "arguments": {"name": entry.name,
                                                      "arguments": example_arguments(d.get("inputSchema") or {})}}
        return text_result({"tool": d, "server": entry.server, "original_name": entry.original, "example": example})
    if name == "filter_tools":
        return _compact(_filter(args, cat, own))
    if name == "list_core_tools":
        return text_result({"tools": [{"name": e.name, "server": OWN_SERVER, "description": e.definition["description"]}
                                      for e in own.entries], "total": len(own.entries),
                            "call": "call_tool {\"name\": \"<core tool>\", \"arguments\": {...}}"})
    if name == "list_resources":
        limit, offset = _page(args)
        items = [{**dict(r.definition), "server": r.server} for r in cat.resources]
        result = _paged("resources", items, limit, offset)
        result["templates"] = [{**dict(t.definition), "server": t.server} for t in cat.templates]
        return text_result(result)
    if name == "describe_resource":
        uri = _required_str(args, "uri")
        entry = cat.resource_index.get(uri) or cat.references.get(uri)  # or an MCP App view a tool names
        if entry is None:
            raise MetaError(f"unknown resource {uri!r}; use list_resources to find URIs")
        return text_result({"resource": dict(entry.definition), "server": entry.server})
    if name == "list_prompts":
        limit, offset = _page(args)
        return text_result(_paged("prompts", [{**dict(p.definition), "server": p.server} for p in cat.prompts],
                                  limit, offset))
    if name == "describe_prompt":
        prompt_name = _required_str(args, "name")
        entry = cat.prompt(prompt_name)
        if entry is None:
            raise MetaError(f"unknown prompt {prompt_name!r}; use list_prompts to find names")
        return text_result({"prompt": dict(entry.definition), "server": entry.server})
    raise MetaError(f"unknown meta-tool {name!r}")


def _model_tools(cat: Catalogue) -> tuple:
    """The tools the meta-tools list to the model: all but those a server shows to an MCP App
    alone (`_meta.ui.visibility` without "model"), which the spec keeps out of a model's list.
    describe_tool and call_tool still reach them by name (an app's host calls them)."""
    if not cat.app_only:
        return cat.tools
    return tuple(e for e in cat.tools if e.name not in cat.app_only)


def _describe_own(name: str, entries: tuple) -> dict:
    """troupe's own tool of that name (a meta-tool, or a core tool this client sees): a server's
    tool never takes such a name (catalogue.build renames it), so this is the only answer."""
    own = next((dict(e.definition) for e in entries if e.name == name), None)
    meta = own is None and name in META_NAMES
    if meta:
        own = next(t for t in META_TOOLS if t["name"] == name)
    if own is None:
        raise MetaError(f"unknown tool {name!r}; use list_tools or filter_tools to find names")
    arguments = example_arguments(own.get("inputSchema") or {})
    # A meta-tool is called directly; a core tool through call_tool (directly too in flat mode).
    example = {"name": name, "arguments": arguments} if meta else \
        {"name": "call_tool", "arguments": {"name": name, "arguments": arguments}}
    return text_result({"tool": own, "server": OWN_SERVER, "original_name": name, "example": example})


class _Then:
    """Two tuples sliced as one: a page of list_tools without copying a 10,000-tool catalogue to
    put troupe's own tools after it."""

    __slots__ = ("first", "second")

    def __init__(self, first: tuple, second: tuple) -> None:
        self.first, self.second = first, second

    def __getitem__(self, cut: slice) -> tuple:
        n = len(self.first)
        start, stop = cut.start or 0, cut.stop
        return self.first[start:stop] + self.second[max(0, start - n):max(0, stop - n)]


def _paged_summaries(entries, total: int, limit: int, offset: int) -> dict:
    """Summarise only the page shown: a 10,000-tool catalogue costs one page, not 10,000 dicts."""
    page = [_tool_summary(t) for t in entries[offset:offset + limit]]
    return {"tools": page, "total": total, "limit": limit, "offset": offset,
            "truncated": offset + len(page) < total}


def _filter(args: dict, cat: Catalogue, own: OwnTools = NO_OWN) -> dict:
    limit, offset = _page(args)
    query, pattern = args.get("query") or "", args.get("pattern") or ""
    server, desc = args.get("server") or "", args.get("description_filter") or ""
    for key, value in (("query", query), ("pattern", pattern), ("server", server), ("description_filter", desc)):
        if not isinstance(value, str):
            raise MetaError(f"{key} must be a string")
    flags = 0 if args.get("case_sensitive") else re.IGNORECASE
    # A pattern with no wildcard means "name contains"; the glob is compiled once per call.
    glob = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
    name_ok = re.compile(fnmatch.translate(glob), flags).match if pattern else None
    desc_ok = re.compile(re.escape(desc), flags).search if desc else None
    tools = cat.tools

    hidden = cat.app_only  # the model's lists leave out tools meant for an MCP App alone

    def keep(t: Entry) -> bool:
        return (not server or t.server == server) and (name_ok is None or name_ok(t.name) is not None) \
            and (desc_ok is None or desc_ok(t.definition.get("description", "")) is not None) \
            and t.name not in hidden

    filtered = bool(server or pattern or desc or hidden)
    mine = [j for j, e in enumerate(own.entries) if not filtered or keep(e)]  # positions in own
    if query:
        index = _index(cat)
        rank = index.name_rank
        matches = [(-score, rank[i], i) for i, score in index.score(query).items()
                   if not filtered or keep(tools[i])]
        # troupe's own tools are not in the snapshot's index (who sees which depends on the client):
        # scored apart with its word weights, numbered after the catalogue's, so ties go to a server's.
        n = len(tools)
        apart = index.score_apart(query, [own.bags[j] for j in mine])
        matches += [(-score, n + j, n + j) for j, score in zip(mine, apart) if score > 0]
        # Only the page shown needs ordering: the best offset+limit, ties broken by name.
        best = heapq.nsmallest(offset + limit, matches)
        return _paged_summaries([tools[i] if i < n else own.entries[i - n] for _, _, i in best],
                                len(matches), limit, offset)
    matches = tuple(t for t in tools if keep(t)) if filtered else tools
    extra = tuple(own.entries[j] for j in mine)
    return _paged_summaries(_Then(matches, extra), len(matches) + len(extra), limit, offset)
