"""Content digests of catalogue lists: equal content gives equal digests in any process, so a list
cursor (and a "did this client's list change" test) means the same on every instance."""
from __future__ import annotations

import base64
import hashlib
from typing import Any, Iterable

import orjson

DIGEST_CHARS = 22  # of a URL-safe base64 SHA-256: 132 bits, plenty to tell catalogues apart


def content_digest(items: Any) -> str:
    """A digest of a JSON value's content (keys sorted; mappings of any kind are JSON objects)."""
    raw = hashlib.sha256(orjson.dumps(items, option=orjson.OPT_SORT_KEYS, default=dict)).digest()
    return base64.urlsafe_b64encode(raw).decode()[:DIGEST_CHARS]


def combined(parts: Iterable[str]) -> str:
    """One digest of several digests, in order (a list's digest from its entries' own)."""
    raw = hashlib.sha256("\n".join(parts).encode()).digest()
    return base64.urlsafe_b64encode(raw).decode()[:DIGEST_CHARS]


def cursor_digest(cat, key: str, variant: tuple = ()) -> str:
    """The digest a page of list `key` of snapshot `cat` carries in its cursor: the list's own
    digest (built with the snapshot), and `variant`, what else shaped the page (mode, core tools)."""
    digest = cat.digests[key]
    return combined((digest, repr(variant))) if variant else digest
