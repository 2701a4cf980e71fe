"""How deeply a parsed JSON message nests, told cheaply: troupe refuses more than MAX_DEPTH levels
where it parses, from clients and upstreams alike; and the id of one too deep to parse at all.

orjson reads 1,024 levels but writes only 254, so a value troupe accepted deeper than that would
crash whichever actor re-encoded it later. 128 leaves room for the envelope troupe wraps around
what it passes on (a client's arguments inside a request, a result inside a meta-tool's answer).
"""
from __future__ import annotations

import re
from typing import Any

import orjson

MAX_DEPTH = 128
# orjson writes at most this many levels (its recursion limit): what is measured against below.
ORJSON_WRITE_LIMIT = 254
_HEADROOM = ORJSON_WRITE_LIMIT - MAX_DEPTH
# Where a message orjson could not parse (deeper than 1,024) names its id, read only where it is
# surely the top level's: first (after "jsonrpc") and followed by result or error, or last.
_JSON_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_HEAD_ID = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _JSON_ID
                      + rb'\s*,\s*"(?:result|error)"')
_HEAD_ANSWER = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"')
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*' + _JSON_ID + rb'\s*\}\s*$')
_SCAN_BYTES = 4096
COUNT_BELOW = 4096  # a text shorter than this has its brackets counted, a longer one searched


def too_deep(data: bytes | bytearray | str, value: Any) -> bool:
    """True if `value`, parsed from `data`, nests deeper than MAX_DEPTH levels (an object or an
    array is one).

    A text with at most MAX_DEPTH opening brackets cannot be too deep: a count in C, nothing
    more, for nearly every message. A bigger one is measured by orjson itself, which refuses to
    write more than ORJSON_WRITE_LIMIT levels: wrapped in the difference, the value fails to encode
    exactly when it is too deep. That is a serialization in C, several times cheaper than any
    scan in Python (about 3 ms for a 1 MB tools/list, against 10 ms for a scan of its bytes)."""
    if not _opens_more_than(data.encode("utf-8") if isinstance(data, str) else data, MAX_DEPTH):
        return False
    for _ in range(_HEADROOM):
        value = [value]
    try:
        orjson.dumps(value)
    except TypeError as exc:  # nothing orjson parsed fails to encode for any other reason
        if "Recursion limit" in str(exc):
            return True
        raise
    return False


def _opens_more_than(data: bytes | bytearray, limit: int) -> bool:
    """Whether `data` holds more than `limit` '{' and '[' in all. A short text is counted; a long
    one is searched (memchr, many times faster than a count) only until the limit is passed, so
    1 MB of prose costs two searches and 1 MB of JSON structure a few hundred short ones."""
    if len(data) < COUNT_BELOW:
        return data.count(b"{") + data.count(b"[") > limit
    found = 0
    for needle in (b"{", b"["):
        at = data.find(needle)
        while at >= 0:
            found += 1
            if found > limit:
                return True
            at = data.find(needle, at + 1)
    return False


def answer_id(data: bytes | bytearray | str) -> Any:
    """The id of a response too deep for orjson to parse, if it can be read with certainty from its
    first or last bytes (None otherwise): the request it answers can then fail at once."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    head = bytes(data[:_SCAN_BYTES])
    found = _HEAD_ID.match(head)
    if found is None and _HEAD_ANSWER.match(head):
        found = _TAIL_ID.search(bytes(data[-_SCAN_BYTES:]))
    if found is None:
        return None
    try:
        return orjson.loads(found.group(1))
    except orjson.JSONDecodeError:
        return None
