"""Echo that needs its credentials on the command line (--api-key=…, --token …), as many real servers do."""
from __future__ import annotations

import sys

from tests.servers.echo import build, parser

# What a redacted launch line would hand over instead of the real value.
REDACTED = "***"


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--api-key", required=True)
    p.add_argument("--token", required=True)
    args = p.parse_args(argv)
    # Refusing a starred value proves troupe launched the whole line, not the shown one.
    if REDACTED in (args.api_key, args.token):
        sys.exit("keyed: got a redacted credential")
    build(args).run()


if __name__ == "__main__":
    main()
