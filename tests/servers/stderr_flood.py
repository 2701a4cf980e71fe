"""Echo MCP test server that writes --mb MiB to stderr at start and during every tools/call."""
import sys

from tests.servers import echo
from tests.servers._mini import MiniServer

LINE = b"stderr flood " + b"." * 1010 + b"\n"  # about 1 KiB a line


def flood(mb: float) -> None:
    # Blocks once the pipe is full if nobody drains stderr: that is the point.
    for _ in range(int(mb * 1024)):
        sys.stderr.buffer.write(LINE)
    sys.stderr.buffer.flush()


class Flooding(MiniServer):
    mb = 5.0

    def _run_call(self, id_, handler, args):
        flood(self.mb)
        super()._run_call(id_, handler, args)


if __name__ == "__main__":
    p = echo.parser(__doc__)
    p.add_argument("--mb", type=float, default=5.0)
    args = p.parse_args()
    server = echo.build(args, Flooding)
    server.mb = args.mb
    flood(args.mb)
    server.run()
