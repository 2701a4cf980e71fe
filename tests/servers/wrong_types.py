"""MCP test server whose answers carry values of the wrong type or JSON nested too deep: an error
code that is a list or an object, a resources/read with `contents: 5`, an input_required whose
input request has `params: "x"`, a result N levels deep; `ask` elicits the client and says what
came back. Over stdio, or with --http PORT over Streamable HTTP (JSON answers; no `ask` there)."""
from __future__ import annotations

import argparse
import itertools
import queue
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from tests.servers import echo
from tests.servers._mini import NO_REPLY, MiniServer

LEVELS_SCHEMA = {"type": "object", "properties": {"levels": {"type": "integer"}}, "required": ["levels"]}
RESOURCE = {"uri": "test://five", "name": "five"}
ASK_WAIT_S = 20.0


def deep_answer(id_: Any, levels: int) -> bytes:
    """A tools/call answer nested exactly `levels` deep (the envelope and result are two of them)."""
    inner = levels - 2
    return (b'{"jsonrpc":"2.0","id":' + orjson.dumps(id_) + b',"result":{"content":[],"deep":'
            + b"[" * inner + b"]" * inner + b"}}")


def misbehaving(id_: Any, name: str, args: dict) -> bytes | None:
    """The raw answer of a misbehaving tool, or None for a well-behaved one."""
    if name == "code_list":
        return orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": [1], "message": "a list"}})
    if name == "code_object":
        return orjson.dumps({"jsonrpc": "2.0", "id": id_, "error": {"code": {"n": 1}, "message": "an object"}})
    if name == "input_bad":
        return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {
            "resultType": "input_required", "inputRequests": {"q": {"method": "elicitation/create", "params": "x"}}}})
    if name == "deep":
        return deep_answer(id_, int(args.get("levels", 300)))
    return None


class WrongTypes(MiniServer):
    """The stdio server: echo's tools, the misbehaving ones, one resource and `ask`."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self._ids = itertools.count(1)
        self._answers: dict[str, queue.Queue] = {}
        for name in ("code_list", "code_object", "input_bad"):
            self.add_tool(name, None, lambda a: NO_REPLY, f"Answers {name} wrongly.")
        self.add_tool("deep", LEVELS_SCHEMA, lambda a: NO_REPLY, "A result nested `levels` deep.")
        self.add_tool("ask", None, self._ask, "Elicit the client; say what it answered.")

    def _ask(self, args: dict) -> str:
        our_id = f"ask-{next(self._ids)}"
        box = self._answers[our_id] = queue.Queue()
        self.send({"jsonrpc": "2.0", "id": our_id, "method": "elicitation/create",
                   "params": {"message": "ok?", "requestedSchema": {"type": "object", "properties": {}}}})
        try:
            answer = box.get(timeout=ASK_WAIT_S)
        except queue.Empty:
            return "no answer"
        if "error" in answer:
            return f"error {answer['error'].get('code')}: {answer['error'].get('message')}"
        return "result " + orjson.dumps(answer.get("result")).decode()

    def on_initialize(self, params: dict) -> dict:
        result = super().on_initialize(params)
        result["capabilities"]["resources"] = {}
        return result

    def on_tools_call(self, id_: Any, params: dict) -> None:
        raw = misbehaving(id_, params.get("name", ""), params.get("arguments") or {})
        if raw is None:
            super().on_tools_call(id_, params)
        else:
            self.send_raw(raw)

    def handle(self, msg: Any) -> None:
        if isinstance(msg, dict) and "method" not in msg and msg.get("id") in self._answers:
            self._answers.pop(msg["id"]).put(msg)
        elif isinstance(msg, dict) and msg.get("method") == "resources/list":
            self.reply(msg["id"], {"resources": [RESOURCE]})
        elif isinstance(msg, dict) and msg.get("method") == "resources/read":
            self.reply(msg["id"], {"contents": 5})
        elif isinstance(msg, dict) and msg.get("method") == "resources/templates/list":
            self.reply(msg["id"], {"resourceTemplates": []})
        else:
            super().handle(msg)


def serve_http(server: WrongTypes, port: int) -> None:
    """The same answers over Streamable HTTP, each POST answered with JSON (no session, no stream)."""

    class Handler(BaseHTTPRequestHandler):
        """One POST: a request answered with its JSON answer, anything else with 202."""

        protocol_version = "HTTP/1.1"

        def log_message(self, format, *args):  # noqa: A002  (the base class's name)
            pass

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802  (http.server's naming)
            self._send(405, b"")

        do_DELETE = do_GET  # noqa: N815

        def do_POST(self):  # noqa: N802
            msg = orjson.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if "id" not in msg or "method" not in msg:
                self._send(202, b"")
                return
            self._send(200, self._answer(msg))

        def _answer(self, msg: dict) -> bytes:
            id_, method, params = msg["id"], msg["method"], msg.get("params") or {}
            if method == "initialize":
                return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": server.on_initialize(params)})
            if method == "tools/list":
                return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": server.on_tools_list(params)})
            if method == "resources/list":
                return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {"resources": [RESOURCE]}})
            if method == "resources/read":
                return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {"contents": 5}})
            if method == "resources/templates/list":
                return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {"resourceTemplates": []}})
            if method == "tools/call":
                raw = misbehaving(id_, params.get("name", ""), params.get("arguments") or {})
                if raw is not None:
                    return raw
                text = (params.get("arguments") or {}).get("text", "")
                return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": text}]}})
            return orjson.dumps({"jsonrpc": "2.0", "id": id_, "result": {}})

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler, bind_and_activate=False)
    httpd.daemon_threads = True
    httpd.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    httpd.server_bind()
    httpd.server_activate()
    print(f"wrong_types: serving http://127.0.0.1:{httpd.server_address[1]}/mcp", file=sys.stderr, flush=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    threading.Event().wait()


def main() -> None:
    parser: argparse.ArgumentParser = echo.parser(__doc__ or "")
    parser.add_argument("--http", type=int, default=None, metavar="PORT", help="serve Streamable HTTP on PORT (0: any)")
    args = parser.parse_args()
    server = echo.build(args, WrongTypes)
    assert isinstance(server, WrongTypes)
    if args.http is None:
        server.run()
    else:
        serve_http(server, args.http)


if __name__ == "__main__":
    main()
