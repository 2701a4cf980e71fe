"""Tool arguments mirrored into HTTP headers (2026-07-28 `x-mcp-header`): where the annotations
sit in an input schema, and when they make a tool invalid. One walk, for both sides: the client
that sends `Mcp-Param-*` headers to a modern upstream and the front that checks a client's."""
from __future__ import annotations

import re
from typing import Any, Iterator

X_MCP_HEADER = "x-mcp-header"
TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an RFC 9110 field name
HEADER_TYPES = frozenset({"string", "integer", "boolean"})  # `number` is excluded by the spec

# JSON Schema 2020-12 keywords whose values are schemas; only `properties` keeps a header path.
_SINGLE = frozenset({"items", "contains", "unevaluatedItems", "additionalProperties", "propertyNames",
                     "unevaluatedProperties", "not", "if", "then", "else", "contentSchema"})
_LIST = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_MAP = frozenset({"patternProperties", "dependentSchemas", "$defs", "definitions"})


def positions(root: Any) -> Iterator[tuple[tuple[str, ...] | None, dict]]:
    """Every schema position with its `properties` path from the root (None once off that chain).
    An explicit stack, no $ref followed: a schema from an upstream ends the walk however deep it is."""
    stack: list[tuple[tuple[str, ...] | None, Any]] = [((), root)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        yield path, node
        for keyword, value in node.items():
            if keyword == "properties" and isinstance(value, dict):
                stack.extend(((*path, k) if path is not None else None, v) for k, v in value.items())
            elif keyword in _SINGLE:
                stack.append((None, value))
            elif keyword in _LIST and isinstance(value, list):
                stack.extend((None, v) for v in value)
            elif keyword in _MAP and isinstance(value, dict):
                stack.extend((None, v) for v in value.values())


def annotated(input_schema: Any) -> Iterator[tuple[tuple[str, ...], str, dict]]:
    """(path, header name, property schema) of each annotation on a plain `properties` chain."""
    for path, node in positions(input_schema):
        token = node.get(X_MCP_HEADER)
        if path and isinstance(token, str):
            yield path, token, node


def invalid_annotation(input_schema: Any) -> str | None:
    """Why the schema's `x-mcp-header` annotations are invalid (such a tool is dropped), or None:
    each must sit on a string, integer or boolean property reached from the root through
    `properties` only, name an RFC 9110 token, and be unique (case-insensitively)."""
    seen: set[str] = set()
    for path, node in positions(input_schema):
        if X_MCP_HEADER not in node:
            continue
        token = node[X_MCP_HEADER]
        if not path:
            return f"{X_MCP_HEADER} outside a plain properties chain"
        where = ".".join(path)
        if not isinstance(token, str) or not TOKEN.fullmatch(token):
            return f"{X_MCP_HEADER} on {where} is not an RFC 9110 token"
        if node.get("type") not in HEADER_TYPES:
            return f"{X_MCP_HEADER} on {where} is on a {node.get('type')!r} property, not a string, integer or boolean"
        if token.lower() in seen:
            return f"{X_MCP_HEADER} {token!r} appears twice"
        seen.add(token.lower())
    return None
