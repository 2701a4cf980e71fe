"""Tiny stdlib+orjson MCP stdio server core for troupe's test servers."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable

import orjson

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = "2025-11-25"
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

# A tool handler returns this to leave the call unanswered forever.
NO_REPLY = object()

Handler = Callable[[dict], Any]


class RpcError(Exception):
    """Raised by a handler to answer with a JSON-RPC error instead of a tool result."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def log(text: str) -> None:
    """One line to stderr, flushed (stdout is reserved for MCP messages)."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


class MiniServer:
    """Newline-delimited JSON-RPC over stdin/stdout; each tools/call runs on its own thread."""

    def __init__(self, name: str = "mini", version: str = "1.0.0", page_size: int | None = None,
                 prefix: str = ""):
        self.name, self.version = name, version
        self.page_size = page_size
        self.prefix = prefix
        self.tools: dict[str, tuple[dict, Handler]] = {}
        self.cancelled: list[Any] = []
        self._lock = threading.Lock()
        # Keep the real stdout for protocol bytes; stray print() calls go to stderr instead.
        self._out = sys.stdout.buffer
        sys.stdout = sys.stderr
        self._in = sys.stdin.buffer

    # ---- tool registration -------------------------------------------------
    def add_tool(self, name: str, schema: dict | None, handler: Handler, description: str = "",
                 output_schema: dict | None = None, annotations: dict | None = None) -> str:
        full = self.prefix + name
        tool = {"name": full, "description": description,
                "inputSchema": schema or {"type": "object", "properties": {}}}
        if output_schema is not None:
            tool["outputSchema"] = output_schema
        if annotations is not None:
            tool["annotations"] = annotations
        with self._lock:
            self.tools[full] = (tool, handler)
        return full

    def add_tools(self, table: dict[str, tuple[dict, Handler]]) -> None:
        for name, (schema, handler) in table.items():
            self.add_tool(name, schema, handler)

    def tool(self, name: str | None = None, schema: dict | None = None, description: str = "",
             output_schema: dict | None = None):
        """Decorator form of add_tool; the name defaults to the function's name."""
        def register(fn: Handler) -> Handler:
            self.add_tool(name or fn.__name__, schema, fn, description or (fn.__doc__ or "").strip(),
                          output_schema)
            return fn
        return register

    # ---- output --------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        """Write bytes as one line on stdout (used by servers that misbehave on purpose)."""
        with self._lock:
            self._out.write(data + b"\n")
            self._out.flush()

    def send(self, message: dict) -> None:
        self.send_raw(orjson.dumps(message))

    def notify(self, method: str, params: dict | None = None) -> None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def reply(self, id_: Any, result: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": id_, "result": result})

    def error(self, id_: Any, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}})

    # ---- dispatch ------------------------------------------------------------
    def on_initialize(self, params: dict) -> dict:
        asked = params.get("protocolVersion")
        return {
            "protocolVersion": asked if asked in SUPPORTED_VERSIONS else LATEST_VERSION,
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": self.name, "version": self.version},
        }

    def on_tools_list(self, params: dict) -> dict:
        with self._lock:
            tools = [tool for tool, _ in self.tools.values()]
        cursor = params.get("cursor")
        try:
            start = int(cursor) if cursor is not None else 0
        except (TypeError, ValueError):
            raise RpcError(INVALID_PARAMS, f"bad cursor {cursor!r}") from None
        if not 0 <= start <= len(tools):
            raise RpcError(INVALID_PARAMS, f"bad cursor {cursor!r}")
        end = len(tools) if not self.page_size else start + self.page_size
        result: dict = {"tools": tools[start:end]}
        if end < len(tools):
            result["nextCursor"] = str(end)
        return result

    def before_call(self, id_: Any, name: str, args: dict) -> None:
        """Hook run on the reader thread, in arrival order, before a call's thread starts."""

    def _run_call(self, id_: Any, handler: Handler, args: dict) -> None:
        try:
            out = handler(args)
            if out is NO_REPLY:
                return
            if isinstance(out, str):
                out = {"content": [{"type": "text", "text": out}]}
        except RpcError as exc:
            out = exc
        except Exception as exc:  # a failing tool is a tool error, not a protocol error
            out = {"content": [{"type": "text", "text": f"{type(exc).__name__}: {exc}"}], "isError": True}
        with self._lock:
            # A cancelled request gets no response at all.
            if id_ in self.cancelled:
                return
        if isinstance(out, RpcError):
            self.error(id_, out.code, out.message)
        else:
            self.reply(id_, out)

    def on_tools_call(self, id_: Any, params: dict) -> None:
        name = params.get("name")
        with self._lock:
            entry = self.tools.get(name)
        if entry is None:
            self.error(id_, INVALID_PARAMS, f"unknown tool: {name}")
            return
        args = params.get("arguments") or {}
        self.before_call(id_, name, args)
        threading.Thread(target=self._run_call, args=(id_, entry[1], args), daemon=True).start()

    def on_notification(self, method: str, params: dict) -> None:
        if method == "notifications/cancelled":
            request_id = params.get("requestId")
            with self._lock:
                self.cancelled.append(request_id)
            log(f"cancelled {request_id}")

    def handle(self, msg: Any) -> None:
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return  # responses to requests we never send, or junk: ignore
        method, params = msg["method"], msg.get("params") or {}
        if "id" not in msg:
            self.on_notification(method, params)
            return
        id_ = msg["id"]
        try:
            if method == "initialize":
                self.reply(id_, self.on_initialize(params))
            elif method == "ping":
                self.reply(id_, {})
            elif method == "tools/list":
                self.reply(id_, self.on_tools_list(params))
            elif method == "tools/call":
                self.on_tools_call(id_, params)
            else:
                self.error(id_, METHOD_NOT_FOUND, f"method not found: {method}")
        except RpcError as exc:
            self.error(id_, exc.code, exc.message)

    def run(self) -> None:
        """Read requests until stdin closes; pending call threads are daemons and die with us."""
        for line in iter(self._in.readline, b""):
            if not line.strip():
                continue
            try:
                msg = orjson.loads(line)
            except orjson.JSONDecodeError:
                log(f"unparseable line: {line[:200]!r}")
                continue
            self.handle(msg)
        sys.stderr.flush()
        # Skip interpreter teardown so a still-running call thread cannot hold the exit.
        os._exit(0)
