"""The immutable Catalogue snapshot: every tool, resource and prompt, named and indexed."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from types import MappingProxyType
from collections.abc import Mapping
from typing import Any, Callable, Sequence

from loguru import logger

from actors.catalogue import apps, naming
from actors.catalogue.digests import combined, content_digest
from actors.lazy import lazy
from actors.protocol import eras
from actors.slicing import Slices, never, paced


def _compile_validator(entry: "Entry"):
    from actors.protocol.validation import compile_validator
    return compile_validator(entry.name, entry.definition.get("inputSchema"))


def _legacy_tools_of(cat: "Catalogue") -> Sequence:
    return eras.legacy_tools(cat.tool_list)


def _modern_tools_of(cat: "Catalogue") -> Sequence:
    return eras.modern_tools(cat.tool_list)


def _build_search_index(cat: "Catalogue"):
    # Built on the greenlet of the first reader that searches (a Session), in slices: 1.3 s of
    # CPU at 10,000 tools must not hold the other clients' calls (actors/slicing.py).
    from actors.catalogue.search import Index, fields
    pause = Slices()
    docs = []
    for t in cat.tools:
        pause()
        docs.append(fields(t, cat.instructions.get(t.server, "")))
    return Index(docs, between=pause)


@dataclass(frozen=True, slots=True)
class Entry:
    """One tool or prompt: its qualified name, owner and the definition to show clients.

    `digest` (of the definition) is built with it; `validator` (its arguments' compiled JSON
    Schema) is a lazy attribute (actors/lazy.py), built on the first call: compiling costs ~2 ms
    a tool, 19 s for 10,000, and most tools are never called. An Entry is shared by the
    catalogue, every profile's view and every workflow composition, so each is built once per
    entry, never once per reader."""

    name: str  # qualified, what clients see
    server: str
    original: str  # the name the owning server knows
    definition: Mapping[str, Any]  # the upstream definition with `name` replaced
    digest: str = field(init=False, repr=False, compare=False)  # of the definition, for list digests
    # As a catalogue's tool_list holds it, and whether the model may not see it (apps.app_only):
    # with the entry, so a rebuild that reuses the entry (build's `reuse`) copies and checks nothing.
    listed: dict = field(init=False, repr=False, compare=False)
    app_only: bool = field(init=False, repr=False, compare=False)
    _validator: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", content_digest(self.definition))  # once, by whoever builds it
        object.__setattr__(self, "listed", dict(self.definition))
        object.__setattr__(self, "app_only", apps.app_only(self.definition))

    validator = lazy(_compile_validator)


@dataclass(frozen=True, slots=True)
class ResourceEntry:
    """One resource (or, in `templates`, one resource template): the URI clients see, its owner,
    and the URI and definition the owning server knows."""

    uri: str  # what clients see (rewritten only on a collision)
    server: str
    original: str
    definition: Mapping[str, Any]
    digest: str = field(init=False, repr=False, compare=False)  # as Entry's

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", content_digest(self.definition))


@dataclass(frozen=True, slots=True)
class Withheld:
    """A tool or prompt a server lists but clients may not see: its definition changed, or is
    new, since the operator approved the server (see actors/trust/pinning.py)."""

    name: str  # the qualified name it would have
    server: str
    original: str
    kind: str  # tools | prompts
    approve: str = ""  # the command that accepts it (trust.approve_hint); "" = `troupe approve SERVER`

    def message(self) -> str:
        what = "tool" if self.kind == "tools" else "prompt"
        command = self.approve or f"troupe approve {self.server}"
        return (f"{what} {self.original!r} of server {self.server} changed or is new since the server was "
                f"approved, so troupe withholds it; an operator can accept it with `{command}`")


@dataclass(frozen=True, slots=True)
class Catalogue:
    """Everything clients may see, as one immutable snapshot: tools, prompts, resources and
    templates, their name indexes, what is withheld, and collisions. Built by the Registry
    (catalogue.build, then views.with_views) and published to its Published[Catalogue], read
    with no actor hop; `version` grows with each rebuild and is what list cursors and
    list_changed notices refer to.

    What readers derive from it is built with it, by its builder, never memoised into it by a
    reader: `views` (each configured profile's cut, see catalogue/views.py) and `digests` (each
    list's content digest, for cursors and list_changed). Some things are lazy attributes instead
    (actors/lazy.py), because building them at every publish would block the hub for seconds at
    10,000 tools while most snapshots never need them: `search_index` (1.4 s at 10,000 tools)
    and each Entry's `validator`; so are `legacy_tool_list` and `modern_tool_list` (tool_list
    in each era's shape, actors/protocol/eras.py), built on a snapshot's first listing in that
    era. All are pure functions of this immutable snapshot, stored whole by one slot store, so
    no reader can change them or see them half-built."""

    version: int = 0
    tools: tuple = ()
    prompts: tuple = ()
    resources: tuple = ()
    templates: tuple = ()  # ResourceEntry with uri = uriTemplate
    tool_index: Mapping[str, Entry] = field(default_factory=lambda: MappingProxyType({}))
    prompt_index: Mapping[str, Entry] = field(default_factory=lambda: MappingProxyType({}))
    resource_index: Mapping[str, ResourceEntry] = field(default_factory=lambda: MappingProxyType({}))
    # MCP Apps views a tool names but its server does not list (catalogue/apps.py): URI → entry,
    # routed like a listed resource, never shown in resources/list.
    references: Mapping[str, ResourceEntry] = field(default_factory=lambda: MappingProxyType({}))
    app_only: frozenset = frozenset()  # qualified names of the tools shown to an MCP App alone
    servers: tuple = ()
    collisions: tuple = ()  # human-readable lines, for the status report
    tool_list: tuple = ()  # the tool definitions as served in flat mode, built once per snapshot
    withheld: Mapping[tuple, Withheld] = field(default_factory=lambda: MappingProxyType({}))  # (kind, name) →
    instructions: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # server → its own words
    task_forms: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))  # server → its tasks' form
    views: Mapping[Any, "Catalogue"] = field(default_factory=lambda: MappingProxyType({}))  # Profile → its view
    # list key (tools, prompts, resources, resourceTemplates) → content digest; computed at
    # construction from the entries' own digests, so a copy (`replace`) gets its own, never ours.
    digests: Mapping[str, str] = field(init=False, repr=False, compare=False)
    _search_index: Any = field(init=False, repr=False, compare=False)
    _legacy_tool_list: Any = field(init=False, repr=False, compare=False)
    _modern_tool_list: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digests", MappingProxyType({
            "tools": combined(e.digest for e in self.tools), "prompts": combined(e.digest for e in self.prompts),
            "resources": combined(r.digest for r in self.resources),
            "resourceTemplates": combined(t.digest for t in self.templates)}))

    search_index = lazy(_build_search_index)
    # tool_list as each era's client may see it (eras): the same tuple unless a tool needs reshaping
    legacy_tool_list = lazy(_legacy_tools_of)
    modern_tool_list = lazy(_modern_tools_of)

    def tool(self, name: str) -> Entry | None:
        return self.tool_index.get(name)

    def validator(self, entry: Entry):
        return entry.validator

    def prompt(self, name: str) -> Entry | None:
        return self.prompt_index.get(name)

    def withheld_tool(self, name: str) -> Withheld | None:
        return self.withheld.get(("tools", name)) if self.withheld else None

    def withheld_prompt(self, name: str) -> Withheld | None:
        return self.withheld.get(("prompts", name)) if self.withheld else None

    def resource_owner(self, uri: str) -> tuple[str, str] | None:
        """(server, upstream uri) for a URI a client asked for, or None."""
        entry = self.resource_index.get(uri) or self.references.get(uri)
        if entry:
            return entry.server, entry.original
        back = naming.unrewrite_uri(uri)
        if back and back[0] in self.servers:
            return back
        for tpl in self.templates:  # a URI produced from a template belongs to its server
            if _template_matches(tpl.original, uri):
                return tpl.server, uri
        owners = {r.server for r in self.resources if _same_scheme(r.original, uri)}
        if len(owners) == 1:
            return owners.pop(), uri
        return None


@dataclass(frozen=True, slots=True)
class ServerLists:
    """What one server contributes (kept by the registry, the input of `build`)."""

    server: str
    prefix: str
    tools: tuple = ()
    resources: tuple = ()
    templates: tuple = ()
    prompts: tuple = ()
    withheld: tuple = ()  # (kind, original name) listed but withheld by pinning
    instructions: str = ""  # the server's initialize instructions: search text, never shown to clients
    tasks: str = ""  # the tasks it creates itself: wire.MODERN, wire.LEGACY or "" (actors/tasks)


def build(lists: Mapping[str, ServerLists], separator: str, version: int,
          reserved: frozenset = frozenset(), between: Callable[[], None] | None = None,
          approve: Callable[[str], str] | None = None, reuse: Mapping | None = None,
          kept: dict | None = None) -> Catalogue:
    """Deterministic: servers in name order, each one's tools and prompts by name; on a
    collision the first keeps the name. `reserved`: troupe's own tool names (meta-tools and
    core tools); a server's tool that would take one is renamed, whatever the order. `between()`
    runs after each item (a slicing.Slices: the Registry yields to the hub there once a slice of
    work is used up; nothing is visible until the whole is returned).

    `reuse`: the `kept` of the previous build. An Entry whose server's listing holds the very same
    item under the same name is taken from it, digest (and compiled validator) included, so a
    rebuild costs what changed, not every tool again: 50 servers arriving one by one made 50
    rebuilds of all the tools so far. `kept` (filled here) is what the next build may reuse."""
    between = between or never
    reuse = reuse if reuse is not None else {}
    kept = kept if kept is not None else {}
    collisions: list[str] = []
    tool_index: dict[str, Entry] = {}
    prompt_index: dict[str, Entry] = {}
    resource_index: dict[str, ResourceEntry] = {}
    references: dict[str, ResourceEntry] = {}
    templates: list[ResourceEntry] = []
    withheld: dict[tuple, Withheld] = {}
    order = sorted(lists)
    for server in order:
        sl = lists[server]
        # Resources first: a tool naming its MCP App view is shown with the URI its server's view has.
        exposures: dict[str, str] = {}  # this server's URI → the one clients see
        for res in sl.resources:
            between()
            uri = res.get("uri")
            if not isinstance(uri, str):
                continue
            exposed = _exposed(server, uri, resource_index, references, collisions)
            exposures.setdefault(uri, exposed)
            resource_index[exposed] = ResourceEntry(exposed, server, uri, MappingProxyType({**res, "uri": exposed}))
        for tool in sl.tools:
            for uri in apps.referenced_uris(tool) if isinstance(tool, Mapping) else ():
                if uri not in exposures:  # a view its server does not list: routed all the same
                    exposed = exposures[uri] = _exposed(server, uri, resource_index, references, collisions)
                    references[exposed] = ResourceEntry(exposed, server, uri, MappingProxyType({"uri": exposed}))
        _add_named(sl, sl.tools, separator, tool_index, collisions, "tool", between, reserved,
                   shape=(lambda item, seen=exposures: apps.with_uris(item, lambda u: seen.get(u, u)))
                   if exposures else None, reuse=reuse, kept=kept, exposed=tuple(exposures.items()))
        _add_named(sl, sl.prompts, separator, prompt_index, collisions, "prompt", between, reuse=reuse, kept=kept)
        for kind, original in sl.withheld:
            qualified = naming.qualify(sl.prefix, separator, original)
            if kind == "tools" and qualified in reserved:  # the name it would have once approved
                qualified = naming.disambiguate(qualified, server, reserved)
            withheld[(kind, qualified)] = Withheld(qualified, server, original, kind,
                                                   approve(server) if approve is not None else "")
        for tpl in sl.templates:
            if isinstance(tpl.get("uriTemplate"), str):
                uri_template = tpl["uriTemplate"]
                templates.append(ResourceEntry(uri_template, server, uri_template, MappingProxyType(dict(tpl))))
    for line in collisions:
        logger.warning("name collision: {}", line)
    tools = tuple(tool_index.values())
    return Catalogue(
        version=version, tools=tools, prompts=tuple(prompt_index.values()),
        resources=tuple(resource_index.values()), templates=tuple(templates),
        tool_index=MappingProxyType(tool_index), prompt_index=MappingProxyType(prompt_index),
        resource_index=MappingProxyType(resource_index), references=MappingProxyType(references),
        app_only=frozenset(e.name for e in tools if e.app_only), servers=tuple(order),
        collisions=tuple(collisions), tool_list=tuple(t.listed for t in paced(tools, between)),
        withheld=MappingProxyType(withheld),
        instructions=MappingProxyType({s: lists[s].instructions for s in order if lists[s].instructions}),
        task_forms=MappingProxyType({s: lists[s].tasks for s in order if lists[s].tasks}))


def _by_name(item) -> str:
    name = item.get("name") if isinstance(item, Mapping) else None
    return name if isinstance(name, str) else ""


def _exposed(server: str, uri: str, listed: Mapping, referenced: Mapping, collisions: list) -> str:
    """The URI clients see for `server`'s `uri`: its own unless an earlier server's resource (or
    MCP App view) has it; then a rewritten one naming the server (naming.rewrite_uri)."""
    first = listed.get(uri) or referenced.get(uri)
    if first is None:
        return uri
    exposed = naming.rewrite_uri(server, uri)
    collisions.append(f"resource {uri!r} of {server} shown as {exposed!r} ({first.server} keeps it)")
    return exposed


@dataclass(frozen=True, slots=True)
class _Block:
    """One server's tools (or prompts) as a build named them, kept for the next build (in `kept`,
    under ("block", kind, server)) when nothing of another server touched them: no collision with
    an earlier server's name, no troupe name taken, no definition reshaped. The next build takes
    the whole block at once when its listing is the very same tuple, under the same prefix,
    separator, reserved names and view URIs, and none of its names is taken by then: the entries,
    their order and the collision lines are what naming each item again would give."""

    source: tuple  # the ServerLists' tools or prompts, by identity
    context: tuple  # (prefix, separator, reserved, view URI exposures)
    entries: dict  # name → Entry, in the order the build inserted them
    collisions: tuple  # this server's own lines ("listed twice")
    kept: tuple  # its items' (key, (item, entry)) for `kept`


def _add_named(sl: ServerLists, source: tuple, separator: str, index: dict, collisions: list, kind: str,
               between: Callable[[], None], reserved: frozenset = frozenset(),
               shape: Callable[[dict], dict] | None = None, reuse: Mapping = MappingProxyType({}),
               kept: dict | None = None, exposed: tuple = ()) -> None:
    """Name and index one server's items of one kind, after every earlier server's (see build).
    `exposed`: the view URIs `shape` rewrites to, as (URI, URI shown) pairs."""
    block_key, context = ("block", kind, sl.server), (sl.prefix, separator, reserved, exposed)
    block = reuse.get(block_key)
    if (block is not None and block.source is source and block.context == context
            and index.keys().isdisjoint(block.entries)):
        index.update(block.entries)
        collisions.extend(block.collisions)
        if kept is not None:
            kept.update(block.kept)
            kept[block_key] = block
        return
    first_collision = len(collisions)
    added: dict[str, Entry] = {}  # this server's, in the order they go into `index`
    own: list[tuple] = []  # the (key, (item, entry)) this server adds to `kept`
    alone = True  # named by its own items alone: a block the next build may take whole
    seen: set[str] = set()
    # Within a server, by name: the order a client sees never depends on how an upstream
    # happened to list (two instances with the same catalogue serve the same pages).
    for item in sorted(source, key=_by_name):
        between()
        original = item.get("name")
        if not isinstance(original, str) or not original:
            continue
        if original in seen:  # before any renaming, which would give the second copy a name of its own
            collisions.append(f"{kind} {original!r} listed twice by {sl.server}; second ignored")
            continue
        seen.add(original)
        name = naming.qualify(sl.prefix, separator, original)
        if name in reserved:
            # troupe's own name, in both modes: a client asking for it always reaches troupe's
            # tool, so the server's is renamed as in any collision (a server cannot win it).
            alone = False
            new = naming.disambiguate(name, sl.server, index.keys() | reserved)
            collisions.append(f"{kind} {name!r} of {sl.server} renamed {new!r} (troupe's own tool keeps it)")
            name = new
        if name in index:
            first = index[name]
            if first.server == sl.server:
                collisions.append(f"{kind} {original!r} listed twice by {sl.server}; second ignored")
                continue
            alone = False
            new = naming.disambiguate(name, sl.server, index)
            collisions.append(f"{kind} {name!r} of {sl.server} renamed {new!r} ({first.server} keeps it)")
            name = new
        shaped = shape(item) if shape is not None else item
        key = (kind, sl.server, name)
        previous = reuse.get(key)
        if previous is not None and previous[0] is item and shaped is item:  # unchanged, and shown as listed
            entry = previous[1]
        else:
            entry = Entry(name, sl.server, original, MappingProxyType({**shaped, "name": name}))
        index[name] = added[name] = entry
        if shaped is not item:
            alone = False
        elif kept is not None:
            kept[key] = (item, entry)
            own.append((key, (item, entry)))
    if alone and kept is not None:
        kept[block_key] = _Block(source, context, added, tuple(collisions[first_collision:]), tuple(own))


def _same_scheme(a: str, b: str) -> bool:
    sa, _, _ = a.partition("://")
    sb, _, _ = b.partition("://")
    return bool(sa) and sa == sb and "://" in a and "://" in b


def _template_matches(template: str, uri: str) -> bool:
    # RFC 6570 level 1 is enough to route: literal parts must match in order.
    pattern = "".join(".+?" if part.startswith("{") else re.escape(part)
                      for part in re.split(r"(\{[^}]*\})", template))
    return re.fullmatch(pattern, uri) is not None
