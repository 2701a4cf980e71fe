"""Modern-only (MCP 2026-07-28) test server: refuses `initialize` with -32022, serves
server/discover, tools (paged), resources (with ttlMs, no listChanged), prompts and
subscriptions/listen; stdio by default, `--http 0` serves POST /mcp (announced on stderr).

Tools: echo, whoami (the _meta it was called with), received (every method it was sent),
add_tool (adds `late` and tells listeners), touch (resources/updated for a URI), sleep,
region (an x-mcp-header argument; returns the Mcp-Param-Region header it saw over HTTP), confirm
(asks the client to confirm `rounds` times through input_required rounds), numbers (an array
as its outputSchema and structuredContent, as only 2026-07-28 allows) and,
with --bad-header-tool, `bad_header` whose x-mcp-header is invalid.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any, Callable

import orjson

VERSION = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
META_SUB = "io.modelcontextprotocol/subscriptionId"
PAGE_SIZE = 3
RESOURCE_TTL_MS = 500
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
EMPTY = {"type": "object", "properties": {}}


def log(text: str) -> None:
    sys.stderr.write(f"modern_only: {text}\n")
    sys.stderr.flush()


class RpcError(Exception):
    """A JSON-RPC error answer (code, message, data)."""

    def __init__(self, code: int, message: str, data: Any = None, http: int = 400):
        super().__init__(message)
        self.code, self.message, self.data, self.http = code, message, data, http


class ModernServer:
    """The protocol logic, transport-free: `handle(msg, headers)` returns the answer (or None for
    a notification); listeners get notifications through their `push` callables."""

    def __init__(self, bad_header_tool: bool = False):
        self.lock = threading.Lock()
        self.received: list[str] = []
        self.listens: dict[Any, tuple[dict, Callable[[dict], None]]] = {}
        self.cancelled: set = set()
        self.listed_resources = 0
        self.tools = [
            {"name": "echo", "description": "Return the given text.", "inputSchema": TEXT},
            {"name": "whoami", "description": "The request _meta it saw.", "inputSchema": EMPTY},
            {"name": "received", "description": "Every method received so far.", "inputSchema": EMPTY},
            {"name": "add_tool", "description": "Add tool `late`, tell listeners.", "inputSchema": EMPTY},
            {"name": "touch", "description": "Announce an update of a resource.", "inputSchema": {
                "type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}},
            {"name": "sleep", "description": "Sleep, then answer.", "inputSchema": {
                "type": "object", "properties": {"seconds": {"type": "number"}}}},
            {"name": "region", "description": "The Mcp-Param-Region header seen.", "inputSchema": {
                "type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}},
            {"name": "confirm", "description": "Ask the client to confirm, `rounds` times (MRTR).", "inputSchema": {
                "type": "object", "properties": {"rounds": {"type": "integer"}}}},
            # 2026-07-28 allows any JSON Schema as outputSchema and any JSON as structuredContent
            {"name": "numbers", "description": "The first `n` numbers, as an array.", "inputSchema": {
                "type": "object", "properties": {"n": {"type": "integer"}}},
             "outputSchema": {"type": "array", "items": {"type": "integer"}}},
        ]
        if bad_header_tool:
            self.tools.append({"name": "bad_header", "description": "Invalid x-mcp-header.", "inputSchema": {
                "type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}})

    # ---- envelope

    def check(self, method: str, params: dict, headers: dict | None) -> None:
        if method == "initialize":
            raise RpcError(-32022, "Unsupported protocol version: this server speaks only 2026-07-28",
                           {"supported": [VERSION], "requested": params.get("protocolVersion")})
        meta = params.get("_meta")
        if not isinstance(meta, dict) or META_VERSION not in meta or META_CAPS not in meta:
            raise RpcError(-32602, "missing _meta protocolVersion or clientCapabilities")
        if meta[META_VERSION] != VERSION:
            raise RpcError(-32022, "Unsupported protocol version", {"supported": [VERSION],
                                                                     "requested": meta[META_VERSION]})
        if headers is not None:
            if headers.get("mcp-protocol-version") != VERSION or headers.get("mcp-method") != method:
                raise RpcError(-32020, "header mismatch: MCP-Protocol-Version / Mcp-Method")
            key = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}.get(method)
            if key and headers.get("mcp-name") != params.get(key):
                raise RpcError(-32020, "header mismatch: Mcp-Name")

    # ---- dispatch

    def handle(self, msg: dict, headers: dict | None = None, push: Callable[[dict], None] | None = None):
        """The response to msg; None for notifications and for a listen (it stays open)."""
        method, params, rid = msg.get("method"), msg.get("params") or {}, msg.get("id")
        with self.lock:
            self.received.append(str(method))
        if rid is None:
            if method == "notifications/cancelled":
                with self.lock:
                    self.cancelled.add(params.get("requestId"))
                    self.listens.pop(params.get("requestId"), None)
            return None
        try:
            self.check(str(method), params, headers)
            if method == "subscriptions/listen":
                return self._listen(rid, params, push)
            handler = getattr(self, "on_" + str(method).replace("/", "_"), None)
            if handler is None:
                raise RpcError(-32601, f"method not found: {method}", http=404)
            result = handler(params, headers)
        except RpcError as exc:
            err: dict = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                err["data"] = exc.data
            return {"jsonrpc": "2.0", "id": rid, "error": err}, exc.http
        if not result.pop("_bare", False):
            result.setdefault("resultType", "complete")
        return {"jsonrpc": "2.0", "id": rid, "result": result}, 200

    def _listen(self, rid, params: dict, push) -> None:
        wanted = params.get("notifications") or {}
        with self.lock:
            self.listens[rid] = (wanted, push)
        assert push is not None
        push({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
              "params": {"notifications": wanted, "_meta": {META_SUB: rid}}})
        return None

    def tell(self, method: str, params: dict, want: Callable[[dict], bool]) -> None:
        with self.lock:
            targets = [(rid, push) for rid, (wanted, push) in self.listens.items() if want(wanted)]
        for rid, push in targets:
            push({"jsonrpc": "2.0", "method": method, "params": {**params, "_meta": {META_SUB: rid}}})

    def on_server_discover(self, params, headers) -> dict:
        return {"supportedVersions": [VERSION], "ttlMs": 60000, "cacheScope": "public",
                "capabilities": {"tools": {"listChanged": True}, "resources": {"subscribe": True},
                                 "prompts": {}, "tasks": {"requests": {"tools": {"call": {}}}},
                                 "extensions": {"io.example/x": {}}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern-only", "version": "1.0"}}}

    def on_tools_list(self, params, headers) -> dict:
        start = int(params.get("cursor") or 0)
        with self.lock:
            page = self.tools[start:start + PAGE_SIZE]
            more = start + PAGE_SIZE < len(self.tools)
        out: dict = {"tools": page, "ttlMs": 60000, "cacheScope": "public"}
        if more:
            out["nextCursor"] = str(start + PAGE_SIZE)
        if start:
            out["_bare"] = True  # a later page without resultType: a client treats it as complete
        return out

    def on_tools_call(self, params, headers) -> dict:
        name, args = params.get("name"), params.get("arguments") or {}
        text: str
        if name == "echo":
            text = str(args.get("text"))
        elif name == "whoami":
            text = orjson.dumps(params.get("_meta")).decode()
        elif name == "received":
            with self.lock:
                text = orjson.dumps(self.received).decode()
        elif name == "add_tool":
            with self.lock:
                if not any(t["name"] == "late" for t in self.tools):
                    self.tools.append({"name": "late", "description": "Added later.", "inputSchema": EMPTY})
            self.tell("notifications/tools/list_changed", {}, lambda w: bool(w.get("toolsListChanged")))
            text = "added"
        elif name == "touch":
            uri = str(args.get("uri"))
            self.tell("notifications/resources/updated", {"uri": uri},
                      lambda w: uri in (w.get("resourceSubscriptions") or ()))
            text = "touched"
        elif name == "sleep":
            time.sleep(float(args.get("seconds") or 0))
            text = "slept"
        elif name == "region":
            text = str((headers or {}).get("mcp-param-region"))
        elif name == "late":
            text = "late"
        elif name == "confirm":
            return self._confirm(int(args.get("rounds") or 1), params)
        elif name == "numbers":
            numbers = list(range(1, int(args.get("n") or 3) + 1))
            return {"content": [{"type": "text", "text": orjson.dumps(numbers).decode()}], "structuredContent": numbers}
        else:
            raise RpcError(-32602, f"unknown tool: {name}")
        return {"content": [{"type": "text", "text": text}]}

    @staticmethod
    def _confirm(rounds: int, params: dict) -> dict:
        """MRTR: one elicitation per round; the state carries the answers so far, and a retry
        whose state or answer is not what this server asked for is refused."""
        state, answers = params.get("requestState"), params.get("inputResponses") or {}
        said: list = []
        if state is not None:
            if not isinstance(state, str) or state.split("|")[0] != "confirm":
                raise RpcError(-32602, f"requestState not issued by this server: {str(state)[:40]!r}")
            said = state.split("|")[1:]
            answer = answers.get(f"q{len(said) + 1}")
            if not isinstance(answer, dict) or "action" not in answer:
                raise RpcError(-32602, f"inputResponses lacks q{len(said) + 1}")
            said.append(str(answer["action"]) + ":" + orjson.dumps(answer.get("content")).decode())
        if len(said) >= rounds:
            return {"content": [{"type": "text", "text": "confirmed " + ", ".join(said)}]}
        ask = {"method": "elicitation/create", "params": {
            "mode": "form", "message": f"Confirm step {len(said) + 1}?", "requestedSchema": {
                "type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}
        return {"resultType": "input_required", "inputRequests": {f"q{len(said) + 1}": ask},
                "requestState": "|".join(["confirm", *said])}

    def on_resources_list(self, params, headers) -> dict:
        with self.lock:
            self.listed_resources += 1
            n = self.listed_resources
        return {"resources": [{"uri": "modern://doc", "name": "doc", "mimeType": "text/plain"},
                              {"uri": "modern://listed", "name": f"listed-{n}"}],
                "ttlMs": RESOURCE_TTL_MS, "cacheScope": "public"}

    def on_resources_templates_list(self, params, headers) -> dict:
        return {"resourceTemplates": [], "ttlMs": 60000, "cacheScope": "public"}

    def on_resources_read(self, params, headers) -> dict:
        uri = params.get("uri")
        if uri != "modern://doc":
            raise RpcError(-32602, f"resource not found: {uri}")
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "modern doc"}],
                "ttlMs": 0, "cacheScope": "private"}

    def on_prompts_list(self, params, headers) -> dict:
        return {"prompts": [{"name": "hello", "arguments": [{"name": "who", "required": True}]}],
                "ttlMs": 60000, "cacheScope": "public"}

    def on_prompts_get(self, params, headers) -> dict:
        who = (params.get("arguments") or {}).get("who", "?")
        return {"messages": [{"role": "user", "content": {"type": "text", "text": f"Hello, {who}!"}}]}


def serve_stdio(server: ModernServer) -> None:
    out, out_lock = sys.stdout.buffer, threading.Lock()

    def write(message: dict) -> None:
        with out_lock:
            out.write(orjson.dumps(message) + b"\n")
            out.flush()

    def run(msg: dict) -> None:
        answer = server.handle(msg, None, write)
        if answer is not None and msg.get("id") not in server.cancelled:
            write(answer[0])

    for line in iter(sys.stdin.buffer.readline, b""):
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(msg, dict):
            threading.Thread(target=run, args=(msg,), daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--http", type=int, default=None, help="serve POST /mcp on this port (0: any)")
    p.add_argument("--bad-header-tool", action="store_true")
    args = p.parse_args(argv)
    server = ModernServer(args.bad_header_tool)
    if args.http is None:
        serve_stdio(server)
    else:
        from tests.servers.modern_http import serve_http
        serve_http(server, args.http)


if __name__ == "__main__":
    main()
