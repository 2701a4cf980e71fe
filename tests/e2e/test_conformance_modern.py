"""The official conformance suite's 2026-07-28 requirements (server mode): troupe must be a transparent front.

The suite (the 0.2 alpha line, `--requirements 2026-07-28`) ships no fixture server, so the backend
is tests/servers/ts_conformance.cjs: the fixtures its scenarios call by name, on the TypeScript
server SDK 2.x. It must pass every required scenario alone, or the comparison would prove little.
troupe (HTTP front, flat, no prefix) in front of it, over HTTP and over stdio, must then pass every
check the backend passes alone (input_required rounds included, through troupe's sealed state),
and the scenarios that only its own front decides even so.
"""
from __future__ import annotations

import pytest
import requests
import yaml

from tests.support import PEERS, ROOT, wait_until
from tests.support.conformance import NEXT, NEXT_VERSION, NODE22, installed_version, required_server_scenarios, \
    run_server
from tests.support.ports import start_announced, stop
from tests.support.troupe import TroupeHttp

pytestmark = pytest.mark.slow  # the official conformance suite, three runs

REVISION = "2026-07-28"
FIXTURE = ROOT / "tests" / "servers" / "ts_conformance.cjs"
READY_S = 30.0
# Scenarios only troupe's own HTTP front decides (Host/Origin, the modern header rules, its streams,
# its caching hints): they must pass whole through troupe, whatever the backend does.
FRONT_SCENARIOS = ("dns-rebinding-protection", "http-header-validation", "http-custom-header-server-validation",
                   "server-sse-multiple-streams", "caching")
@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """The fixture server over HTTP, for the direct run and for troupe's HTTP upstream."""
    assert installed_version(NEXT) == NEXT_VERSION, f"run .ci/run: {NEXT} holds another conformance release"
    log = tmp_path_factory.mktemp("backend") / "ts_conformance.log"
    proc, port = start_announced([str(NODE22 / "node"), str(FIXTURE), "0"], log, env={"TROUPE_PEERS_DIR": str(PEERS)})
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.fixture(scope="module")
def direct(backend, tmp_path_factory):
    return run_server(backend, tmp_path_factory.mktemp("direct") / "out", NEXT, "--requirements", REVISION)


@pytest.fixture(scope="module", params=["streamable-http", "stdio"])
def through(request, backend, direct, tmp_path_factory):
    """The suite run through troupe, with the fixture as its upstream over HTTP or over stdio.
    Depends on `direct` so the backend is measured alone before troupe talks to it."""
    if request.param == "stdio":
        transport = {"type": "stdio", "stdio": {"command": str(NODE22 / "node"), "args": [str(FIXTURE), "stdio"],
                                                "env": {"TROUPE_PEERS_DIR": str(PEERS)}}}
    else:
        transport = {"type": "streamable-http", "streamable_http": {"url": backend}}
    tmp = tmp_path_factory.mktemp(f"troupe-{request.param}")
    config = tmp / "troupe.yaml"
    # pin: false because the suite's trigger tools add a tool and a prompt mid-run, which tool pinning
    # would rightly withhold until an operator approves them; transparency is what is measured here.
    config.write_text(yaml.safe_dump({"servers": [{"name": "fixture", "prefix": "", "pin": False,
                                                   "transport": transport}],
                                      "serve": {"mode": "flat"}, "discovery": {"enabled": False}}))
    troupe = TroupeHttp(config)
    try:
        wait_until(lambda: _ready(troupe), READY_S, interval=0.1, message="the fixture ready behind troupe")
        report = run_server(troupe.url, tmp / "out", NEXT, "--requirements", REVISION)
    finally:
        assert troupe.stop() == 0
    return request.param, report


def _ready(troupe: TroupeHttp) -> bool:
    servers = requests.get(troupe.base + "/status", timeout=5).json()["servers"]
    return any(s["name"] == "fixture" and s["state"] == "ready" for s in servers)


def test_the_backend_alone_passes_every_required_scenario(direct):
    required = required_server_scenarios(NEXT, REVISION)
    assert required, "the requirement set names no server scenario"
    missing = sorted(set(required) - direct.scenarios)
    assert not missing, f"required scenarios the suite did not run: {missing}"
    failing = {s: {c: v for c, v in direct.of(s).items() if v not in ("SUCCESS", "INFO")} for s in required}
    failing = {s: checks for s, checks in failing.items() if checks}
    assert not failing, f"the fixture fails required checks on its own:\n{direct.summary}\n{failing}"


def test_troupe_passes_whatever_the_backend_passes(direct, through, capsys):
    upstream, report = through
    with capsys.disabled():
        print(f"\n--- conformance {REVISION}, the fixture alone:\n{direct.summary}")
        print(f"--- conformance {REVISION}, troupe (flat, no prefix) in front of it over {upstream}:\n{report.summary}")
    compared = direct.passed()
    assert len(compared) > 100, f"too few checks compared ({len(compared)}): did the suite run?"
    missing = sorted(compared - report.passed())
    assert not missing, f"checks the backend passes but troupe fails over {upstream}: {missing}"


def test_the_front_passes_its_own_scenarios(through):
    upstream, report = through
    for scenario in FRONT_SCENARIOS:
        checks = report.of(scenario)
        assert checks and all(v in ("SUCCESS", "INFO") for v in checks.values()), (scenario, checks)
