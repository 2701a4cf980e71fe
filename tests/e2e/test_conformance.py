"""The official MCP conformance suite (server mode): troupe must be a transparent front.

troupe in flat mode with prefixes off, in front of server-everything, must pass every
check server-everything passes alone, plus every DNS-rebinding check. Both summaries are
printed so a regression is visible in the test output.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import PEERS, peer_bin
from tests.support.ports import start_with_port_retry, stop
from tests.support.troupe import TroupeHttp

pytestmark = pytest.mark.slow  # the official conformance suite, twice per backend

NODE22 = PEERS / "node22" / "node_modules" / ".bin"
FRONT_END_SCENARIOS = ("dns-rebinding-protection",)  # troupe's own front door: must pass whole


def _conformance(url: str, out: Path) -> dict[tuple[str, str], str]:
    """Run every server scenario; returns (scenario, check id) → status."""
    if not (NODE22 / "node").exists():
        raise AssertionError(f"Node 22 not installed at {NODE22}: run .ci/run")
    env = {**os.environ, "PATH": f"{NODE22}:{os.environ['PATH']}"}
    proc = subprocess.run([peer_bin("conformance"), "server", "--url", url, "-o", str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    summary = proc.stdout[proc.stdout.find("=== SUMMARY"):]
    results: dict[tuple[str, str], str] = {}
    for scenario_dir in sorted(out.iterdir()):
        checks = json.loads((scenario_dir / "checks.json").read_text())
        scenario = re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", scenario_dir.name.removeprefix("server-"))
        for check in checks:
            results[(scenario, check["id"])] = check["status"]
    assert results, f"the conformance suite ran no scenario:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    results[("_summary", "text")] = summary
    return results


@pytest.fixture
def everything_http(tmp_path):
    # server-everything takes a fixed PORT: started again on another port if that one was taken.
    argv = [peer_bin("mcp-server-everything"), "streamableHttp"]
    proc, port = start_with_port_retry(lambda port: (argv, {"PORT": str(port)}), tmp_path / "everything.log")
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


def _passed(results) -> set:
    return {k for k, v in results.items() if v == "SUCCESS"}


@pytest.mark.parametrize("backend", ["stdio", "streamable-http"])
def test_troupe_passes_whatever_the_backend_passes(tmp_path, everything_http, capsys, backend):
    import yaml
    direct = _conformance(everything_http, tmp_path / "direct")
    if backend == "stdio":
        transport = {"type": "stdio", "stdio": {"command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}
    else:
        transport = {"type": "streamable-http", "streamable_http": {"url": everything_http}}
    config = tmp_path / "troupe.yaml"
    config.write_text(yaml.safe_dump({"servers": [{"name": "everything", "prefix": "", "transport": transport}],
                                      "serve": {"mode": "flat"}, "discovery": {"enabled": False}}))
    troupe = TroupeHttp(config)
    try:
        through = _conformance(troupe.url, tmp_path / "troupe")
    finally:
        troupe.stop()
    with capsys.disabled():
        print(f"\n--- conformance, server-everything alone:\n{direct[('_summary', 'text')]}")
        print(f"--- conformance, troupe (flat, no prefix) in front of it over {backend}:\n"
              f"{through[('_summary', 'text')]}")
    missing = sorted(k for k in _passed(direct) if k not in _passed(through) and k[0] != "_summary")
    assert not missing, f"checks server-everything passes but troupe fails: {missing}"
    front = {k: v for k, v in through.items() if k[0] in FRONT_END_SCENARIOS}
    assert front and all(v == "SUCCESS" for v in front.values()), front
