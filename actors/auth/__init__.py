"""OAuth 2.1 sign-in to protected upstream HTTP servers (the MCP authorization spec, client side)."""
