"""Test-process setup: suites that run troupe's code in-process are gevent-patched.

tests/actors and tests/integration run troupe's actors inside the test process, so
that process is patched first, like production (TROUPE_TEST_GEVENT=1). tests/unit
and tests/e2e drive real processes from plain threads and the official asyncio
SDK, which must not run patched. `python -m tests` runs the two groups apart.
"""
import os
import time

if os.environ.get("TROUPE_TEST_GEVENT") == "1":
    from gevent import monkey

    monkey.patch_all()

import tempfile  # noqa: E402

import pytest  # noqa: E402

# A module- or session-scoped fixture's troupe starts before any test's own config directory is
# set (_own_approvals_file is per test): it gets this run's own, never the user's ~/.config/troupe.
os.environ.setdefault("TROUPE_CONFIG_DIR", tempfile.mkdtemp(prefix="troupe-tests-config-"))

from tests.support.ports import refused_port  # noqa: E402


@pytest.hookimpl(trylast=True)  # after -m has deselected, so shards share out what will run
def pytest_collection_modifyitems(config, items):
    """TROUPE_TEST_SHARD=I/N keeps every Nth selected test from the Ith: `python -m tests --quick` runs N at once."""
    shard = os.environ.get("TROUPE_TEST_SHARD")
    if not shard:
        return
    index, count = (int(n) for n in shard.split("/"))
    keep = [item for i, item in enumerate(items) if i % count == index]
    config.hook.pytest_deselected(items=[item for i, item in enumerate(items) if i % count != index])
    items[:] = keep


@pytest.fixture(autouse=True)
def _own_approvals_file(tmp_path_factory, monkeypatch):
    """Every test gets its own approvals file (troupe's config directory), so pins one test
    records never withhold another test's tools, and the real ~/.config is never written."""
    monkeypatch.setenv("TROUPE_CONFIG_DIR", str(tmp_path_factory.mktemp("troupe-config")))


_REAL_CONFIG_DIR = os.path.join(os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "troupe")
_STARTED = time.time()


def _written_since(directory: str, since: float) -> list[str]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [name for name in names if os.stat(os.path.join(directory, name)).st_mtime >= since]


_WRITERS: dict[str, str] = {}  # a file found written in the user's config directory → the test it appeared after


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    """Note which test a write to the user's config directory first appeared after (a stat per test)."""
    for name in _written_since(_REAL_CONFIG_DIR, _STARTED):
        _WRITERS.setdefault(name, item.nodeid)


def pytest_sessionfinish(session, exitstatus):
    """A troupe a test started wrote the user's own config directory: it was launched without the
    test's environment (see tests/support/troupe.stdio_params), and its pins leak into other tests."""
    written = _written_since(_REAL_CONFIG_DIR, _STARTED)
    if written:
        writer = session.config.get_terminal_writer()
        writer.line()
        found = ", ".join(f"{name} (after {_WRITERS.get(name, '?')})" for name in sorted(written))
        writer.line(f"FAILED: tests wrote the user's troupe config directory {_REAL_CONFIG_DIR}: {found}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def dead_port():
    """A loopback port that refuses connections for the whole test; no other process can take it meanwhile."""
    with refused_port() as port:
        yield port
