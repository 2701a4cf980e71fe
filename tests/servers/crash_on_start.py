"""MCP test server that writes to stderr and exits with status 3 before reading anything."""
import sys

if __name__ == "__main__":
    sys.stderr.write("crash_on_start: failing on purpose\n")
    sys.stderr.flush()
    sys.exit(3)
