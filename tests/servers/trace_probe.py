"""MCP test server whose tool `probe` answers with the trace context it received: the request's
`_meta.traceparent` / `_meta.tracestate` (every other _meta key too) and, over HTTP, the
`traceparent` / `tracestate` headers. Over stdio by default; `--http --port 0` serves plain
JSON-RPC over Streamable HTTP (JSON answers, a session id) on loopback and announces its port.
The probe's argument `secret` is never echoed: the tests look for it in the spans."""
from __future__ import annotations

import argparse
import http.server
import secrets
import sys
from typing import Any

import orjson

from tests.servers._mini import INVALID_PARAMS, LATEST_VERSION, METHOD_NOT_FOUND, MiniServer

PROBE_SCHEMA = {"type": "object", "properties": {"secret": {"type": "string"}}}
TOOL = {"name": "probe", "description": "Report the trace context this request carried.", "inputSchema": PROBE_SCHEMA}


def probe_result(params: dict, headers: dict | None) -> dict:
    meta = params.get("_meta")
    report: dict[str, Any] = {"meta": meta if isinstance(meta, dict) else None}
    if headers is not None:
        report["headers"] = {key: headers.get(key) for key in ("traceparent", "tracestate")}
    return {"content": [{"type": "text", "text": orjson.dumps(report).decode()}]}


class StdioProbe(MiniServer):
    """The stdio form: MiniServer, with tools/call answered from the whole params (its _meta too)."""

    def on_tools_call(self, id_: Any, params: dict) -> None:
        if params.get("name") != "probe":
            self.error(id_, INVALID_PARAMS, f"unknown tool: {params.get('name')}")
            return
        self.reply(id_, probe_result(params, None))


def answer(message: dict, headers: dict) -> dict | None:
    """The JSON-RPC answer of one HTTP-borne message (None: a notification)."""
    if "id" not in message:
        return None
    rid, method, params = message["id"], message.get("method"), message.get("params") or {}
    if method == "initialize":
        result: dict = {"protocolVersion": params.get("protocolVersion", LATEST_VERSION),
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "trace-probe", "version": "1"}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call" and params.get("name") == "probe":
        result = probe_result(params, headers)
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": METHOD_NOT_FOUND, "message": f"no {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


class Handler(http.server.BaseHTTPRequestHandler):
    """POST /mcp: one JSON-RPC message, answered as application/json (202 for a notification).
    No GET stream (405), as Streamable HTTP allows."""

    protocol_version = "HTTP/1.1"  # keep-alive: troupe pools its connections
    session = secrets.token_hex(8)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        message = orjson.loads(body)
        headers = {key.lower(): value for key, value in self.headers.items()}
        reply = answer(message, headers) if isinstance(message, dict) else None
        if reply is None:
            self._send(202, b"", {})
            return
        self._send(200, orjson.dumps(reply), {"Content-Type": "application/json", "Mcp-Session-Id": self.session})

    def do_GET(self) -> None:
        self._send(405, b"", {"Allow": "POST"})

    def do_DELETE(self) -> None:
        self._send(200, b"", {})

    def _send(self, status: int, body: bytes, headers: dict) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # quiet: the tests read stderr for the announcement
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, default=0, help="0: any free port, announced on stderr")
    args = parser.parse_args()
    if not args.http:
        server = StdioProbe(name="trace-probe")
        server.add_tool("probe", PROBE_SCHEMA, lambda arguments: "unused", TOOL["description"])
        server.run()
        return
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"trace-probe: serving http://127.0.0.1:{httpd.server_address[1]}/mcp", file=sys.stderr, flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
