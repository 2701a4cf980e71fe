"""Discovery: find MCP servers in client config files and on PATH, merge, store, watch."""
