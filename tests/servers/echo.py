"""Fast minimal MCP test server: echo, add, sleep, fail, pid, notify_change and N synthetic tools."""
from __future__ import annotations

import argparse
import os
import time

from tests.servers._mini import MiniServer

TEXT_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
              "required": ["a", "b"]}
SUM_SCHEMA = {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}
SLEEP_SCHEMA = {"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}


def parser(description: str = __doc__) -> argparse.ArgumentParser:
    """The echo flags; servers that behave 'like echo' extend this parser."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tools", type=int, default=0, help="add N synthetic tools t0000..")
    p.add_argument("--page-size", type=int, default=None, help="tools/list page size")
    p.add_argument("--name", default="echo", help="serverInfo name")
    p.add_argument("--prefix-tools", default="", help="prefix for every tool name")
    return p


def add_echo_tools(server: MiniServer, extra: int = 0) -> None:
    @server.tool("echo", TEXT_SCHEMA, "Return the given text.")
    def echo(args):
        return args["text"]

    @server.tool("add", ADD_SCHEMA, "Add two numbers.", output_schema=SUM_SCHEMA)
    def add(args):
        total = args["a"] + args["b"]
        # The spec asks for the structured value as text too.
        return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}

    @server.tool("sleep", SLEEP_SCHEMA, "Sleep for the given seconds, then answer.")
    def sleep(args):
        time.sleep(float(args["seconds"]))
        return "slept"

    @server.tool("fail", None, "Always fails with a tool error.")
    def fail(args):
        return {"content": [{"type": "text", "text": "boom"}], "isError": True}

    @server.tool("pid", None, "Return the server's process id.")
    def pid(args):
        return str(os.getpid())

    @server.tool("notify_change", None, "Add tool late_tool and announce the list change.")
    def notify_change(args):
        server.add_tool("late_tool", None, lambda a: "late", "Added by notify_change.")
        # Notify before replying, so a client sees the change no later than the reply.
        server.notify("notifications/tools/list_changed")
        return "changed"

    for i in range(extra):
        server.add_tool(f"t{i:04d}", None, lambda a, i=i: f"t{i:04d}", f"Synthetic tool number {i}.")


def build(args: argparse.Namespace, server_class: type[MiniServer] = MiniServer) -> MiniServer:
    server = server_class(name=args.name, page_size=args.page_size, prefix=args.prefix_tools)
    add_echo_tools(server, args.tools)
    return server


def main(argv: list[str] | None = None) -> None:
    build(parser().parse_args(argv)).run()


if __name__ == "__main__":
    main()
