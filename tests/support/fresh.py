"""Run code in a fresh interpreter: for what is process-wide (gevent's patching, sys.modules, a
child watcher that reaps every child), which must not leak into pytest's own process."""
from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.support import ROOT


def run_fresh(code: str, *path: str, env: dict | None = None) -> Any:
    """The JSON value `code` prints last, run by `python -c` from the repository root with `path`
    after it on PYTHONPATH, a minimal PATH and `env`; a non-zero exit fails with its stderr."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join([str(ROOT), *path]), **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])
