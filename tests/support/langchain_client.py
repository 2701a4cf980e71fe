"""langchain-mcp-adapters as a client of troupe over stdio: reads one resource and gets one prompt,
each through a session of its own (the adapters start a fresh troupe per operation), and prints
what it got as one JSON object. Runs in the adapters' own venv ($TROUPE_PEERS_DIR/langchain-venv:
they need mcp<2), so it imports nothing of troupe's.

usage: langchain_client.py --uri URI --prompt NAME --arg KEY=VALUE -- COMMAND ARGS...
"""
import argparse
import asyncio
import json
import os

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(args: argparse.Namespace) -> dict:
    command, *rest = args.command
    client = MultiServerMCPClient({"troupe": {"transport": "stdio", "command": command, "args": rest,
                                              "env": dict(os.environ), "cwd": os.getcwd()}})
    blobs = await client.get_resources("troupe", uris=[args.uri])
    messages = await client.get_prompt("troupe", args.prompt, arguments=dict(a.split("=", 1) for a in args.arg))
    return {"resource": [blob.as_string() for blob in blobs],
            "prompt": [message.content if isinstance(message.content, str) else str(message.content)
                       for message in messages]}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--uri", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--arg", action="append", default=[])
    p.add_argument("command", nargs="+")
    print(json.dumps(asyncio.run(main(p.parse_args()))))
