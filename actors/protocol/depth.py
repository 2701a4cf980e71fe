"""How deeply a JSON text nests, told cheaply from its bytes: troupe refuses more than MAX_DEPTH
levels where it parses, from clients and upstreams alike.

orjson reads 1,024 levels but writes only 254, so a value troupe accepted deeper than that would
crash whichever actor re-encoded it later. 128 leaves room for the envelope troupe wraps around
what it passes on (a client's arguments inside a request, a result inside a meta-tool's answer).
"""
from __future__ import annotations

import re
from itertools import accumulate
from typing import Any

import orjson

MAX_DEPTH = 128
# Brackets outside strings become +1 / -1 (as signed bytes); everything else is deleted.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
# Where a message orjson could not parse (deeper than 1,024) names its id, read only where it is
# surely the top level's: first (after "jsonrpc") and followed by result or error, or last.
_JSON_ID = rb'(-?\d+|"(?:[^"\\]|\\.)*")'
_HEAD_ID = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*' + _JSON_ID
                      + rb'\s*,\s*"(?:result|error)"')
_HEAD_ANSWER = re.compile(rb'\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"(?:result|error)"')
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*' + _JSON_ID + rb'\s*\}\s*$')
_SCAN_BYTES = 4096


def too_deep(data: bytes | bytearray | str, limit: int = MAX_DEPTH) -> bool:
    """True if valid JSON `data` nests deeper than `limit` levels (an object or array is one).

    A text with at most `limit` opening brackets cannot be too deep: two counts, nothing more,
    for nearly every message. Bigger ones are measured on their brackets outside strings (escaped
    quotes and backslashes removed first, then the strings between quotes), all in C but the
    running sum, which touches only brackets."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if data.count(b"{") + data.count(b"[") <= limit:
        return False
    if b'\\"' in data:
        # An escape is a backslash and one character: removing `\\` pairs left to right takes each
        # escaped backslash, so every `\"` left is an escaped quote.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside = b"".join(data.split(b'"')[::2]) if b'"' in data else data
    steps = outside.translate(_STEPS, _NOT_BRACKET)
    if len(steps) <= 2 * limit:
        return False
    return max(accumulate(memoryview(steps).cast("b"))) > limit


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
