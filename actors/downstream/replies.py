"""How an upstream outcome becomes the answer a client gets, and troupe's own list pages."""
from __future__ import annotations

import base64
from typing import Any

from actors.catalogue.digests import content_digest  # noqa: F401 - page()'s callers digest with it
from actors.catalogue.digests import cursor_digest
from actors.downstream import metatools
from actors.messages import UpstreamError
from actors.protocol import jsonrpc
from actors.protocol.modern import MISSING_CAPABILITY


PAGE_SIZE = 500  # list results per page; troupe's own cursors walk the merged catalogue


def page(items: list, params: dict, key: str, digest: str) -> dict:
    """One page of a merged list. The cursor is the digest of the list's content plus an offset,
    not a counter of this process: any instance serving the same catalogue continues the page,
    and a cursor cut from another catalogue (changed since, or never troupe's) is refused."""
    cursor = params.get("cursor")
    offset = 0
    if cursor is not None:
        try:
            raw = base64.urlsafe_b64decode(str(cursor).encode()).decode()
            cursor_digest, o = raw.split(":")
            offset = int(o)
        except (ValueError, UnicodeDecodeError):
            raise BadCursor(f"invalid cursor {cursor!r}") from None
        if cursor_digest != digest:
            raise BadCursor(f"stale cursor {cursor!r}: the list changed since it was cut; list again from the start")
        if offset < 0 or offset > len(items):
            raise BadCursor(f"invalid cursor {cursor!r}")
    page = items[offset:offset + PAGE_SIZE]
    out: dict[str, Any] = {key: page}
    if offset + PAGE_SIZE < len(items):
        out["nextCursor"] = base64.urlsafe_b64encode(f"{digest}:{offset + PAGE_SIZE}".encode()).decode()
    return out


def paged(rid, params: dict, sink, items: list, key: str, cat, variant=(), extra: dict | None = None) -> bool:
    """Answer with one page of `items` (cut from snapshot `cat`; `variant` names what else shaped
    them), its cursor a digest of their content: any instance with the same catalogue continues it.
    `extra`: fields the result carries besides (a modern list's caching hints). False when the
    cursor was refused: the client was shown nothing of `cat`."""
    digest = cursor_digest(cat, key, variant)
    try:
        sink(jsonrpc.result(rid, {**page(items, params, key, digest), **(extra or {})}))
        return True
    except BadCursor as exc:
        sink(jsonrpc.error(rid, jsonrpc.INVALID_PARAMS, str(exc)))
        return False


class BadCursor(Exception):
    """Raised by page() for a cursor troupe did not hand out (or cut from a newer catalogue);
    the request is answered with invalid params."""
    pass


# ---------------------------------------------------------------- answer shapes


# Upstream errors a client must see as errors, not as a failed tool: the client can act on them
# (declare the capability the server named), and a model reading an isError text cannot.
RELAYED_ERRORS = frozenset({MISSING_CAPABILITY})


def tool_outcome(rid, outcome) -> dict:
    """A backend result unchanged; a failure becomes an isError result naming the server, except
    a protocol error only the client can mend (RELAYED_ERRORS), relayed with its data."""
    if isinstance(outcome, UpstreamError):
        if outcome.code in RELAYED_ERRORS:
            return jsonrpc.error(rid, outcome.code, outcome.message, outcome.data)
        return jsonrpc.result(rid, metatools.text_result(failure_text(outcome), is_error=True))
    return jsonrpc.result(rid, outcome)


def plain_tool_outcome(rid, outcome) -> dict:
    """tool_outcome for a call that asked for no task: a server's task handle in its place (one it
    was never offered: troupe declares the tasks extension upstream only for a task call) would
    hand the client a server's own id it cannot follow, so it becomes an error result saying so."""
    if isinstance(outcome, dict) and (outcome.get("resultType") == "task" or
                                      ("task" in outcome and "content" not in outcome)):
        return jsonrpc.result(rid, metatools.text_result(
            "the server answered with a task although this call asked for none (its client did not declare "
            "the tasks extension, or the task augmentation)", is_error=True))
    return tool_outcome(rid, outcome)


def failure_text(err: UpstreamError) -> str:
    if err.code in (jsonrpc.SERVER_UNAVAILABLE, jsonrpc.REQUEST_TIMEOUT):
        return err.message
    return f"server {err.server} returned error {err.code}: {err.message}"


def ignore(outcome) -> None:
    pass


def passthrough(transform=None):
    def shape(rid, outcome) -> dict:
        if isinstance(outcome, UpstreamError):
            if outcome.code in (jsonrpc.SERVER_UNAVAILABLE, jsonrpc.REQUEST_TIMEOUT):
                return jsonrpc.error(rid, outcome.code, outcome.message, {"server": outcome.server})
            return jsonrpc.error(rid, outcome.code, outcome.message, outcome.data)
        return jsonrpc.result(rid, transform(outcome) if transform else outcome)
    return shape


def restore_uris(result: dict, original: str, exposed: str) -> dict:
    if original == exposed:
        return result
    contents = [{**c, "uri": exposed} if isinstance(c, dict) and c.get("uri") == original else c
                for c in result.get("contents") or ()]
    return {**result, "contents": contents}


def resource_as_tool(rid, outcome) -> dict:
    if isinstance(outcome, UpstreamError):
        return tool_outcome(rid, outcome)
    content = [{"type": "resource", "resource": c} for c in outcome.get("contents") or () if isinstance(c, dict)]
    return jsonrpc.result(rid, {"content": content})


def prompt_as_tool(rid, outcome) -> dict:
    if isinstance(outcome, UpstreamError):
        return tool_outcome(rid, outcome)
    return jsonrpc.result(rid, metatools.text_result(outcome))
