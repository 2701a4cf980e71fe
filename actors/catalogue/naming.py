"""Qualified names: prefix + separator + name, LLM-safe, unique, mapped both ways."""
from __future__ import annotations

import hashlib
import re
from urllib.parse import quote, unquote

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
REWRITE_SCHEME = "troupe"
UI_HEAD = "ui://"
UI_REWRITE_HEAD = f"{UI_HEAD}{REWRITE_SCHEME}/"


def short_hash(text: str, n: int = 8) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:n]


def qualify(prefix: str, separator: str, name: str) -> str:
    """`prefix<sep>name` made to match ^[A-Za-z0-9_-]{1,64}$; long names get a stable hash tail."""
    raw = f"{prefix}{separator}{name}" if prefix else name
    safe = _UNSAFE.sub("_", raw) or "_"
    if len(safe) > MAX_NAME or safe != raw and len(safe) > MAX_NAME - 9:
        safe = f"{safe[:MAX_NAME - 9]}_{short_hash(raw)}"
    return safe


def disambiguate(name: str, server: str, taken) -> str:
    """A deterministic new name for a colliding entry: the server's hash keeps it stable."""
    candidate = f"{name[:MAX_NAME - 7]}_{short_hash(server, 6)}"
    n = 2
    while candidate in taken:
        candidate = f"{name[:MAX_NAME - 10]}_{short_hash(server + str(n), 6)}_{n}"[:MAX_NAME]
        n += 1
    return candidate


def rewrite_uri(server: str, uri: str) -> str:
    """A reversible URI for a resource whose URI another server also uses. An MCP App's view
    stays in the `ui://` scheme (hosts refuse to render any other): ui://troupe/SERVER/REST."""
    if uri.startswith(UI_HEAD):
        return f"{UI_REWRITE_HEAD}{quote(server, safe='')}/{uri[len(UI_HEAD):]}"
    return f"{REWRITE_SCHEME}://{quote(server, safe='')}/{quote(uri, safe='')}"


def unrewrite_uri(uri: str) -> tuple[str, str] | None:
    """(server, upstream uri) of a URI rewrite_uri made, or None. A server's own URI that merely
    looks rewritten is found first in the catalogue's index (Catalogue.resource_owner)."""
    if uri.startswith(UI_REWRITE_HEAD):
        server, sep, rest = uri[len(UI_REWRITE_HEAD):].partition("/")
        return (unquote(server), UI_HEAD + rest) if server and sep else None
    head = f"{REWRITE_SCHEME}://"
    if not uri.startswith(head):
        return None
    server, _, rest = uri[len(head):].partition("/")
    return unquote(server), unquote(rest)
