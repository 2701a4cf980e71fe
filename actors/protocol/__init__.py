"""JSON-RPC codec, MCP constants and argument validation."""
