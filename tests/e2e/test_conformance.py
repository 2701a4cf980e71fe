"""The official MCP conformance suite (server mode): troupe must be a transparent front.

troupe in flat mode with prefixes off, in front of server-everything, must pass every
check server-everything passes alone, plus every DNS-rebinding check. Both summaries are
printed so a regression is visible in the test output.
"""
from __future__ import annotations

import pytest

from tests.support import peer_bin
from tests.support.conformance import run_server
from tests.support.ports import start_with_port_retry, stop
from tests.support.troupe import TroupeHttp

pytestmark = pytest.mark.slow  # the official conformance suite, twice per backend

FRONT_END_SCENARIOS = ("dns-rebinding-protection",)  # troupe's own front door: must pass whole


@pytest.fixture
def everything_http(tmp_path):
    # server-everything takes a fixed PORT: started again on another port if that one was taken.
    argv = [peer_bin("mcp-server-everything"), "streamableHttp"]
    proc, port = start_with_port_retry(lambda port: (argv, {"PORT": str(port)}), tmp_path / "everything.log")
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.mark.parametrize("backend", ["stdio", "streamable-http"])
def test_troupe_passes_whatever_the_backend_passes(tmp_path, everything_http, capsys, backend):
    import yaml
    direct = run_server(everything_http, tmp_path / "direct")
    if backend == "stdio":
        transport = {"type": "stdio", "stdio": {"command": peer_bin("mcp-server-everything"), "args": ["stdio"]}}
    else:
        transport = {"type": "streamable-http", "streamable_http": {"url": everything_http}}
    config = tmp_path / "troupe.yaml"
    config.write_text(yaml.safe_dump({"servers": [{"name": "everything", "prefix": "", "transport": transport}],
                                      "serve": {"mode": "flat"}, "discovery": {"enabled": False}}))
    troupe = TroupeHttp(config)
    try:
        through = run_server(troupe.url, tmp_path / "troupe")
    finally:
        troupe.stop()
    with capsys.disabled():
        print(f"\n--- conformance, server-everything alone:\n{direct.summary}")
        print(f"--- conformance, troupe (flat, no prefix) in front of it over {backend}:\n{through.summary}")
    missing = sorted(direct.passed() - through.passed())
    assert not missing, f"checks server-everything passes but troupe fails: {missing}"
    front = {k: v for k, v in through.checks.items() if k[0] in FRONT_END_SCENARIOS}
    assert front and all(v == "SUCCESS" for v in front.values()), front
