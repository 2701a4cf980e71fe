"""Echo MCP test server whose tool `stop_reading` makes it stop reading stdin for good while it
stays alive (its stdin pipe then fills up); a `sleep 1000` grandchild shares its process group."""
import subprocess
import threading

from tests.servers import echo
from tests.servers._mini import MiniServer


class NoStdin(MiniServer):
    def on_tools_call(self, id_, params: dict) -> None:
        super().on_tools_call(id_, params)  # the call's own thread answers it
        if params.get("name") == self.prefix + "stop_reading":
            threading.Event().wait()  # the reader thread never reads again; the process lives on


if __name__ == "__main__":
    args = echo.parser(__doc__).parse_args()
    # Its pipes are /dev/null, so only a kill of the group ends it.
    child = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = echo.build(args, NoStdin)
    server.add_tool("stop_reading", None, lambda a: "no longer reading stdin",
                    "Answer, then never read stdin again.")
    server.add_tool("grandchild_pid", None, lambda a: str(child.pid), "Pid of the sleeping grandchild.")
    server.run()
