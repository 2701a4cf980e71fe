"""Read-only workspace MCP server over stdio: list, read, search and inspect files under one root."""
# The docstring above is also `--help`'s description. This module is the MCP side (the JSON-RPC
# methods and the stdio loop); the tools and the file access are actors.bundled.workspace_tools.
from __future__ import annotations

import argparse
import base64
import mimetypes
import os
import sys
import traceback
from pathlib import Path
from urllib.parse import unquote_to_bytes, urlparse

import orjson

from actors.bundled.workspace_tools import (
    BINARY_SNIFF_BYTES,
    MAX_FILE_BYTES,
    SCHEMAS,
    TOOLS,
    ToolError,
    Workspace,
    check_args,
    clean,
    log,
)
from actors.protocol import jsonrpc, mcp

VERSION = "0.1.0"
MAX_RESOURCES = 100
INSTRUCTIONS = (
    "Read-only access to the files of one workspace directory. All paths are relative to the "
    "workspace root. Use list_files to explore, search_text to find code or text, read_file to "
    "read (page long files with offset/limit) and file_info for size, type and line count."
)


class RpcError(Exception):
    """A JSON-RPC error response for the request being handled."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


class Server:
    """The MCP side of the workspace server: one handler per JSON-RPC method; `handle` turns
    one input line into at most one response."""

    def __init__(self, workspace: Workspace):
        self.ws = workspace
        self.methods = {"initialize": self.initialize, "ping": lambda p: {},
                        "tools/list": lambda p: {"tools": TOOLS}, "tools/call": self.call_tool,
                        "resources/list": self.list_resources, "resources/read": self.read_resource,
                        "resources/templates/list": self.list_templates}

    def initialize(self, params):
        # troupe's own rule and versions (actors.protocol.mcp): the client's if spoken, else the newest
        return {"protocolVersion": mcp.negotiate(params.get("protocolVersion")),
                "capabilities": {"tools": {}, "resources": {}},
                "serverInfo": {"name": "troupe-workspace", "version": VERSION},
                "instructions": INSTRUCTIONS}

    def call_tool(self, params):
        name, args = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(args, dict):
            raise RpcError(jsonrpc.INVALID_PARAMS, "tools/call needs a string 'name' and an object 'arguments'")
        if name not in SCHEMAS:
            raise RpcError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {name}; available: {sorted(SCHEMAS)}")
        try:
            out = getattr(self.ws, name)(**check_args(name, args))
        except ToolError as exc:
            return {"content": [{"type": "text", "text": f"{name} failed: {exc}"}], "isError": True}
        except OSError as exc:  # permissions, races with deletion: the model should see them, not -32603
            return {"content": [{"type": "text", "text": f"{name} failed: {clean(str(exc))}"}], "isError": True}
        if isinstance(out, dict):
            return {"content": [{"type": "text", "text": orjson.dumps(out, option=orjson.OPT_INDENT_2).decode()}],
                    "structuredContent": out}
        return {"content": [{"type": "text", "text": t} for t in ([out] if isinstance(out, str) else out)]}

    def list_resources(self, params):
        files = sorted(p for p in self.ws.root.iterdir() if p.is_file() and not p.is_symlink())
        return {"resources": [{"uri": p.as_uri(), "name": clean(p.name), "mimeType": _mime(p),
                               "size": p.stat().st_size} for p in files[:MAX_RESOURCES]]}

    def list_templates(self, params):
        return {"resourceTemplates": [{
            "uriTemplate": self.ws.root.as_uri().rstrip("/") + "/{path}", "name": "workspace-file",
            "description": "Any file in the workspace; path is relative to the root and may contain '/'."}]}

    def read_resource(self, params):
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(jsonrpc.INVALID_PARAMS, "resources/read needs a string 'uri'")
        parsed = urlparse(uri)
        if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
            raise RpcError(jsonrpc.INVALID_PARAMS, f"only file:// URIs are served, got {uri!r}")
        try:
            path = self.ws.existing(os.fsdecode(unquote_to_bytes(parsed.path)))
            data = path.read_bytes() if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES else None
        except (ToolError, OSError) as exc:
            raise RpcError(jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {uri} ({clean(str(exc))})") from None
        if data is None:
            raise RpcError(jsonrpc.RESOURCE_NOT_FOUND, f"Resource not found: {uri} (not a file, or over 5 MB)")
        item = {"uri": uri, "mimeType": _mime(path)}
        if b"\x00" in data[:BINARY_SNIFF_BYTES]:
            item["blob"] = base64.b64encode(data).decode("ascii")
        else:
            item["text"] = data.decode("utf-8", "replace")
        return {"contents": [item]}

    def handle(self, line: bytes) -> dict | None:
        """One input line in, at most one response out."""
        try:
            msg = jsonrpc.decode(line)
        except ValueError as exc:
            return jsonrpc.error(None, jsonrpc.PARSE_ERROR, f"Parse error: {exc}")
        if not isinstance(msg, dict) or not isinstance(msg.get("method", ""), str):
            return jsonrpc.error(None, jsonrpc.INVALID_REQUEST, "Invalid request: expected one JSON-RPC object")
        if jsonrpc.is_response(msg) or jsonrpc.is_notification(msg):
            return None  # nothing to cancel or acknowledge in a sequential server
        id_ = msg.get("id")
        id_ = id_ if isinstance(id_, (str, int)) and not isinstance(id_, bool) else None
        if "method" not in msg or msg.get("jsonrpc") != "2.0" or id_ is None:
            return jsonrpc.error(id_, jsonrpc.INVALID_REQUEST,
                                 "Invalid request: needs jsonrpc '2.0', a method and a string or integer id")
        method, params = msg["method"], {} if msg.get("params") is None else msg["params"]
        handler = self.methods.get(method)
        if handler is None:
            return jsonrpc.error(id_, jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method}")
        if not isinstance(params, dict):
            return jsonrpc.error(id_, jsonrpc.INVALID_PARAMS, f"params of {method} must be an object")
        try:
            return jsonrpc.result(id_, handler(params))
        except RpcError as exc:
            return jsonrpc.error(id_, exc.code, str(exc))
        except Exception as exc:  # a bug must cost one request, never the server
            log(f"{method} failed:\n{traceback.format_exc()}")
            return jsonrpc.error(id_, jsonrpc.INTERNAL_ERROR, f"Internal error: {clean(str(exc))}")


def _mime(path: Path) -> str:
    return mimetypes.guess_type(path.name)[0] or "text/plain"


def serve(root: Path, stdin=None, stdout=None) -> None:
    server = Server(Workspace(root))
    stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must never corrupt the protocol stream
    for line in stdin:
        if not line.strip():
            continue
        reply = server.handle(line)
        if reply is None:
            continue
        try:
            data = jsonrpc.encode(reply)
        except TypeError as exc:  # orjson.JSONEncodeError; keep the client's request from hanging
            data = jsonrpc.encode(jsonrpc.error(reply.get("id"), jsonrpc.INTERNAL_ERROR, f"unencodable reply: {exc}"))
        stdout.write(data + b"\n")
        stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m actors.bundled.workspace", description=__doc__)
    parser.add_argument("--root", default=".", help="workspace directory to serve (default: current directory)")
    root = Path(parser.parse_args(argv).root).resolve()
    if not root.is_dir():
        log(f"--root {root} is not a directory")
        return 2
    log(f"serving {root} read-only (version {VERSION})")
    try:
        serve(root)
    except (BrokenPipeError, KeyboardInterrupt):
        pass  # client went away or was interrupted: a quiet exit, not a traceback
    return 0


if __name__ == "__main__":
    sys.exit(main())
