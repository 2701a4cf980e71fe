"""The upstream side: one Connection actor per MCP server, its handshake, lists, stats and subscriptions."""
