"""The downstream side: one Session actor per MCP client, the meta-tools and core tools it serves."""
