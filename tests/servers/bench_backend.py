"""Fastest stdio MCP server we can write: one thread, answers initialize, tools/list, tools/call(echo) at once."""
from __future__ import annotations

import argparse
import os
import sys

import orjson

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
EMPTY_SCHEMA = {"type": "object", "properties": {}}


def catalogue(extra: int) -> list[dict]:
    """echo plus `extra` synthetic tools with varied words, so filter queries have something to match."""
    words = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
    tools = [{"name": "echo", "description": "Return the given text.", "inputSchema": TEXT_SCHEMA}]
    for i in range(extra):
        tools.append({"name": f"t{i:05d}", "description": f"Synthetic tool {i}: {words[i % 10]} {words[i // 10 % 10]}.",
                      "inputSchema": EMPTY_SCHEMA})
    return tools


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--tools", type=int, default=0, help="add N synthetic tools t00000..")
    p.add_argument("--page-size", type=int, default=1000, help="tools/list page size")
    args = p.parse_args(argv)
    tools = catalogue(args.tools)
    names = {t["name"] for t in tools}
    out, inp = sys.stdout.buffer, sys.stdin.buffer
    dumps, loads = orjson.dumps, orjson.loads

    def send(rid, result=None, error=None) -> None:
        msg = {"jsonrpc": "2.0", "id": rid}
        if error is not None:
            msg["error"] = error
        else:
            msg["result"] = result
        out.write(dumps(msg) + b"\n")
        out.flush()

    for line in iter(inp.readline, b""):
        try:
            msg = loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue  # notifications and stray responses need no answer
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "tools/call":
            name = params.get("name")
            arguments = params.get("arguments") or {}
            if name == "echo":
                send(rid, {"content": [{"type": "text", "text": str(arguments.get("text", ""))}]})
            elif name in names:
                send(rid, {"content": [{"type": "text", "text": name}]})
            else:
                send(rid, error={"code": -32602, "message": f"unknown tool: {name}"})
        elif method == "initialize":
            asked = params.get("protocolVersion")
            send(rid, {"protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
                       "capabilities": {"tools": {}}, "serverInfo": {"name": "bench", "version": "1"}})
        elif method == "ping":
            send(rid, {})
        elif method == "tools/list":
            start = int(params.get("cursor") or 0)
            end = start + args.page_size
            result = {"tools": tools[start:end]}
            if end < len(tools):
                result["nextCursor"] = str(end)
            send(rid, result)
        else:
            send(rid, error={"code": -32601, "message": f"method not found: {method}"})
    os._exit(0)


if __name__ == "__main__":
    main()
