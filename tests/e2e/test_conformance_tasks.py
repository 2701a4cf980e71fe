"""The official conformance suite's tasks scenarios (SEP-2663, the 0.2 alpha's extension
`io.modelcontextprotocol/tasks`, not scored by any requirement set yet): troupe must relay a task
server's tasks as transparently as it relays its tools.

The suite ships no fixture server, so the backend is tests/servers/conformance_tasks.py (FastMCP
with fastmcp-tasks): the tools the scenarios call by name. Each scenario runs on its own
(`--scenario`; the CLI has no per-extension selector), first against the fixture alone, then
through troupe (HTTP front, flat, no prefix, the fixture its one Streamable HTTP upstream; the
default serve.tasks, whose mint_after never applies to a server that makes its own tasks). Every
check the fixture passes alone must pass through troupe; there are no expected differences.
"""
from __future__ import annotations

import sys

import pytest
import requests
import yaml

from tests.support import wait_until
from tests.support.conformance import NEXT, NEXT_VERSION, extension_scenarios, installed_version, run_scenarios
from tests.support.ports import start_announced, stop
from tests.support.troupe import TroupeHttp

pytestmark = pytest.mark.slow  # twenty runs of the suite (~1 min)

EXTENSION = "io.modelcontextprotocol/tasks"
READY_S = 30.0
# The 0.2.0-alpha.12 tasks scenarios, so a suite that adds or renames one is noticed here.
SCENARIOS = ["tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
             "tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope",
             "tasks-status-notifications", "tasks-required-task-error", "tasks-mrtr-composition"]
# A scenario the suite itself skips: it reports one SKIPPED check, whoever is tested.
SKIPPED_BY_THE_SUITE = {("tasks-status-notifications", "tasks-status-notifications")}


@pytest.fixture(scope="module")
def backend(tmp_path_factory):
    """The fixture server over Streamable HTTP, for the direct run and as troupe's upstream."""
    assert installed_version(NEXT) == NEXT_VERSION, f"run .ci/run: {NEXT} holds another conformance release"
    log = tmp_path_factory.mktemp("backend") / "conformance_tasks.log"
    proc, port = start_announced([sys.executable, "-m", "tests.servers.conformance_tasks", "--http", "0"], log)
    yield f"http://127.0.0.1:{port}/mcp"
    stop(proc)


@pytest.fixture(scope="module")
def direct(backend, tmp_path_factory):
    return run_scenarios(backend, tmp_path_factory.mktemp("direct"), NEXT, SCENARIOS)


@pytest.fixture(scope="module")
def through(backend, direct, tmp_path_factory):
    """The scenarios through troupe. Depends on `direct` so the fixture is measured alone first."""
    tmp = tmp_path_factory.mktemp("troupe")
    config = tmp / "troupe.yaml"
    config.write_text(yaml.safe_dump({"servers": [{"name": "fixture", "prefix": "", "pin": False, "transport": {
        "type": "streamable-http", "streamable_http": {"url": backend}}}],
        "serve": {"mode": "flat"}, "discovery": {"enabled": False}}))
    troupe = TroupeHttp(config)
    try:
        wait_until(lambda: _ready(troupe), READY_S, interval=0.1, message="the fixture ready behind troupe")
        return run_scenarios(troupe.url, tmp / "out", NEXT, SCENARIOS)
    finally:
        assert troupe.stop() == 0


def _ready(troupe: TroupeHttp) -> bool:
    servers = requests.get(troupe.base + "/status", timeout=5).json()["servers"]
    return any(s["name"] == "fixture" and s["state"] == "ready" for s in servers)


def test_the_suite_names_these_tasks_scenarios():
    assert extension_scenarios(NEXT, EXTENSION) == SCENARIOS


def test_the_fixture_alone_passes_every_tasks_check(direct):
    assert direct.scenarios == set(SCENARIOS), direct.scenarios
    failing = {key: status for key, status in direct.checks.items()
               if status not in ("SUCCESS", "INFO") and key not in SKIPPED_BY_THE_SUITE}
    assert not failing, f"the fixture fails tasks checks on its own:\n{direct.summary}\n{failing}"


def test_troupe_passes_whatever_the_fixture_passes(direct, through, capsys):
    with capsys.disabled():
        print(f"\n--- conformance tasks scenarios, the fixture alone:\n{direct.summary}")
        print(f"--- conformance tasks scenarios, troupe (flat, no prefix) in front of it:\n{through.summary}")
    compared = direct.passed()
    assert len(compared) > 40, f"too few checks compared ({len(compared)}): did the suite run?"
    missing = sorted(compared - through.passed())
    assert not missing, f"checks the fixture passes but troupe fails: {missing}"
