"""MCP servers that ship with troupe and run as its own upstreams."""
