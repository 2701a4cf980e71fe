"""MCP test server whose tool `route` marks arguments with `x-mcp-header` (MCP 2026-07-28):
a modern HTTP client mirrors them in Mcp-Param-* headers, which troupe's front must check."""
from __future__ import annotations

from tests.servers._mini import MiniServer

ROUTE_SCHEMA = {"type": "object", "required": ["region"], "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"},
    "shard": {"type": "integer", "x-mcp-header": "Shard"},
    "dry": {"type": "boolean", "x-mcp-header": "Dry"},
    "note": {"type": "string"}}}


def main() -> None:
    server = MiniServer(name="params")
    server.add_tool("route", ROUTE_SCHEMA, lambda args: f"routed to {args['region']}",
                    "Answer with the region it was routed to.")
    server.run()


if __name__ == "__main__":
    main()
