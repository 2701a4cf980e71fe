"""MCP test server with a huge tool list: echo plus N synthetic tools, made page by page as they
are listed (nothing held for them), and optionally one tool `huge` whose description is M MiB.
The tool `inflate` sets both at run time and announces the list change."""
from __future__ import annotations

from tests.servers import echo
from tests.servers._mini import INVALID_PARAMS, MiniServer, RpcError

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
EMPTY_SCHEMA = {"type": "object", "properties": {}}
INFLATE_SCHEMA = {"type": "object", "properties": {"synthetic": {"type": "integer"}, "huge_mb": {"type": "number"}}}


class ManyTools(MiniServer):
    """The registered tools (echo's) first, then `synthetic` tools s00000.. and `huge`, cut into
    pages of `page_size` (default 1,000) on demand."""

    def __init__(self, *args, synthetic: int = 0, huge_bytes: int = 0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.synthetic, self.huge_bytes = synthetic, huge_bytes

    def _synthetic(self, i: int) -> dict:
        return {"name": f"s{i:05d}", "inputSchema": EMPTY_SCHEMA,
                "description": f"Synthetic tool {i}: {WORDS[i % 10]} {WORDS[i // 10 % 10]} {WORDS[i // 100 % 10]}."}

    def on_tools_list(self, params: dict) -> dict:
        own = [tool for tool, _ in self.tools.values()]
        total = len(own) + self.synthetic + (1 if self.huge_bytes else 0)
        cursor = params.get("cursor")
        try:
            start = int(cursor) if cursor is not None else 0
        except (TypeError, ValueError):
            raise RpcError(INVALID_PARAMS, f"bad cursor {cursor!r}") from None
        end = min(total, start + (self.page_size or 1000))
        tools = []
        for i in range(start, end):
            if i < len(own):
                tools.append(own[i])
            elif i < len(own) + self.synthetic:
                tools.append(self._synthetic(i - len(own)))
            else:
                tools.append({"name": "huge", "inputSchema": EMPTY_SCHEMA,
                              "description": "A huge description: " + "lorem ipsum " * (self.huge_bytes // 12)})
        result: dict = {"tools": tools}
        if end < total:
            result["nextCursor"] = str(end)
        return result


def main() -> None:
    p = echo.parser(__doc__ or "")
    p.add_argument("--synthetic", type=int, default=0, help="list N synthetic tools s00000..")
    p.add_argument("--huge-mb", type=float, default=0.0, help="add tool `huge` with a description of this many MiB")
    args = p.parse_args()
    server = ManyTools(args.name, page_size=args.page_size, synthetic=args.synthetic,
                       huge_bytes=int(args.huge_mb * 1024 * 1024))
    echo.add_echo_tools(server)

    @server.tool("inflate", INFLATE_SCHEMA, "List `synthetic` tools and a `huge_mb` description from now on.")
    def inflate(args):
        server.synthetic = int(args.get("synthetic", 0))
        server.huge_bytes = int(float(args.get("huge_mb", 0)) * 1024 * 1024)
        server.notify("notifications/tools/list_changed")
        return f"listing {server.synthetic} synthetic tools"

    server.run()


if __name__ == "__main__":
    main()
