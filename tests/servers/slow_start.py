"""Echo MCP test server that sleeps --delay seconds before reading stdin."""
import time

from tests.servers import echo

if __name__ == "__main__":
    p = echo.parser(__doc__)
    p.add_argument("--delay", type=float, default=2.0)
    args = p.parse_args()
    time.sleep(args.delay)
    echo.build(args).run()
