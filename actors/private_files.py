"""Writing a file that holds secrets or decisions (approvals, OAuth tokens): owner-only, atomic."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from actors.off_hub import blocking


def write_private(path: str | Path, blob: bytes, prefix: str, *, durable: bool = True) -> None:
    """Replace `path` with `blob`: a 0600 temporary file in the same directory (mkstemp creates it
    0600), fsync, rename over. A reader sees the old file or the new one, never half of one. The
    fsync waits for the disk off the hub (actors/off_hub.py): only the writing greenlet waits.
    `durable=False` skips it, for a file that is rewritten and may be lost in a crash (it is still
    replaced whole): no worker thread then, whose stack and gevent's pool cost ~0.5 MiB of RSS."""
    folder = os.path.dirname(str(path)) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(blob)
            fh.flush()
            if durable:
                blocking(os.fsync, fh)  # the file, not its number: a late worker finds it closed, not reused
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
