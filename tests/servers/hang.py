"""MCP test server whose tool `hang` never replies; `echo` still works and cancels are logged."""
from tests.servers._mini import NO_REPLY, MiniServer
from tests.servers.echo import TEXT_SCHEMA

if __name__ == "__main__":
    server = MiniServer(name="hang")
    server.add_tool("echo", TEXT_SCHEMA, lambda a: a["text"], "Return the given text.")
    # The base server logs "cancelled <id>" to stderr when the cancel notification arrives.
    server.add_tool("hang", None, lambda a: NO_REPLY, "Never answers.")
    server.run()
