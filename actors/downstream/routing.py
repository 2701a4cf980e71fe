"""Where a client's request naming a resource or a completion ref goes: pure functions of the
catalogue snapshot and the passthrough server, so the Session only forwards what they say."""
from __future__ import annotations

from typing import cast

from actors.catalogue.snapshot import Catalogue


def resource_owner(cat: Catalogue, bare: str | None, uri) -> tuple[str, str] | None:
    """(server, upstream URI) for `uri`; an unlisted URI goes to the passthrough server `bare`
    if there is one."""
    if not isinstance(uri, str):
        return None
    owner = cat.resource_owner(uri)
    if owner is None and bare is not None:
        return bare, uri
    return owner


def completion_target(cat: Catalogue, bare: str | None, params: dict) -> tuple[str, dict] | None:
    """(server, params to send it) for completion/complete, the ref renamed to the server's own
    name or URI; None when no prompt, resource or template matches and there is no passthrough."""
    ref = params.get("ref")
    target = None
    if isinstance(ref, dict) and ref.get("type") == "ref/prompt":
        entry = cat.prompt(cast(str, ref.get("name"))) if isinstance(ref.get("name"), str) else None
        if entry is not None:
            target = (entry.server, {**params, "ref": {**ref, "name": entry.original}})
    elif isinstance(ref, dict) and ref.get("type") == "ref/resource" and isinstance(ref.get("uri"), str):
        owner = cat.resource_owner(ref["uri"])
        for tpl in cat.templates:  # a template's own URI is a valid completion ref too
            if owner is None and tpl.uri == ref["uri"]:
                owner = (tpl.server, tpl.original)
        if owner is not None:
            target = (owner[0], {**params, "ref": {**ref, "uri": owner[1]}})
    if target is None and bare is not None:
        target = (bare, params)
    return target
