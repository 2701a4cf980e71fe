"""Peer aggregator for scripts/bench.py: FastMCP's create_proxy over an mcpServers file, on stdio or HTTP."""
from __future__ import annotations

import argparse
import json
import logging
import sys


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--config", required=True, help="a Claude-style {'mcpServers': {...}} JSON file")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    p.add_argument("--port", type=int, default=0)
    args = p.parse_args()
    # Quiet: its per-request logging would be measured as proxy cost, and stdout belongs to MCP.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    from fastmcp.server import create_proxy

    with open(args.config) as f:
        config = json.load(f)
    proxy = create_proxy(config, mode="auto", name="fastmcp-proxy")
    if args.transport == "stdio":
        proxy.run(show_banner=False)
    else:
        print(f"fastmcp-proxy: serving http://127.0.0.1:{args.port}/mcp", file=sys.stderr, flush=True)
        proxy.run(transport="http", host="127.0.0.1", port=args.port, show_banner=False, log_level="warning")


if __name__ == "__main__":
    main()
