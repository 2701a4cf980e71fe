"""MCP test server whose tool `huge` answers with one JSON-RPC line of about --mb MiB."""
from tests.servers._mini import MiniServer
from tests.servers.echo import TEXT_SCHEMA

if __name__ == "__main__":
    import argparse

    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--mb", type=float, default=10.0)
    args = p.parse_args()
    size = int(args.mb * 1024 * 1024)
    server = MiniServer(name="huge_line")
    server.add_tool("echo", TEXT_SCHEMA, lambda a: a["text"], "Return the given text.")
    server.add_tool("huge", None, lambda a: "x" * size, f"Return {size} characters in one reply.")
    server.run()
