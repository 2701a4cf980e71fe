"""Echo MCP test server that ignores SIGTERM and leaves a `sleep 1000` grandchild in its group."""
import signal
import subprocess

from tests.servers import echo

if __name__ == "__main__":
    args = echo.parser(__doc__).parse_args()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Spawned after SIG_IGN, so the grandchild inherits it: only SIGKILL to the group ends both.
    # Its pipes are /dev/null, so it never holds the client's stdout open.
    child = subprocess.Popen(["sleep", "1000"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = echo.build(args)
    server.add_tool("grandchild_pid", None, lambda a: str(child.pid), "Pid of the sleeping grandchild.")
    server.run()
