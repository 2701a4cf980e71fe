"""A 60-second soak with backends killed and frozen: every call answered, nothing leaked."""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.support import PYTHON, ROOT

pytestmark = pytest.mark.slow  # a 60 s soak


def test_soak_60s_answers_everything_and_leaks_nothing(tmp_path):
    out = tmp_path / "soak.json"
    proc = subprocess.run([PYTHON, "scripts/soak.py", "--duration", "60", "--rate", "40", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=240)
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["sent"] >= 2000
    assert figures["unanswered"] == 0
    assert figures["answered_ok"] + figures["answered_error"] == figures["sent"]
    assert figures["answered_ok"] > figures["sent"] * 0.5  # faults cost some calls, not most
    assert figures["restarts"] >= 10  # the chaos really happened
    assert figures["children_left"] == 0 and figures["troupe_exit_code"] == 0
    assert figures["fd_growth"] <= 10
    assert figures["rss_growth_kb"] < 50_000
