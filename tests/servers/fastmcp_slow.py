"""FastMCP test server "demo" (tools, a resource, a template, a prompt: see fastmcp_demo) that
sleeps --delay seconds before it reads stdin, as a server with a slow start does."""
import argparse
import time

if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--delay", type=float, default=1.0)
    args = p.parse_args()
    time.sleep(args.delay)
    from tests.servers.fastmcp_demo import mcp  # imported after the sleep: FastMCP's own import is part of a start

    mcp.run(show_banner=False)
