"""MCP test server that reads the initialize request and exits (status 1) without replying."""
import sys

import orjson

if __name__ == "__main__":
    for line in iter(sys.stdin.buffer.readline, b""):
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(msg, dict) and msg.get("method") == "initialize":
            sys.stderr.write("exit_during_init: got initialize, exiting\n")
            sys.stderr.flush()
            sys.exit(1)
