"""Serving troupe to downstream MCP clients: stdio and HTTP."""
