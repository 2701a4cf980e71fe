"""Echo MCP test server whose tool `flood_logs` answers at once, then sends `count`
notifications/message of `mb` MiB of data each (data starts with the 6-digit sequence number)."""
import threading

from tests.servers import echo
from tests.servers._mini import MiniServer

FLOOD_SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}, "mb": {"type": "number"}}}


class LogFlood(MiniServer):
    def on_initialize(self, params: dict) -> dict:
        result = super().on_initialize(params)
        result["capabilities"]["logging"] = {}
        return result


def main() -> None:
    server = echo.build(echo.parser(__doc__).parse_args(), LogFlood)

    def flood(count: int, size: int) -> None:
        for i in range(count):
            server.notify("notifications/message", {"level": "info", "logger": "flood",
                                                    "data": f"{i:06d}" + "x" * (size - 6)})

    @server.tool("flood_logs", FLOOD_SCHEMA, "Answer, then send count log notifications of mb MiB each.")
    def flood_logs(args):
        count, size = int(args.get("count", 300)), int(float(args.get("mb", 1)) * 1024 * 1024)
        threading.Thread(target=flood, args=(count, size), daemon=True).start()
        return f"started {count}"

    server.run()


if __name__ == "__main__":
    main()
