"""Client-side transports: how troupe reaches upstream MCP servers."""
