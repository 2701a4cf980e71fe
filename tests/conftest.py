"""Test-process setup: suites that run troupe's code in-process are gevent-patched.

tests/actors and tests/integration run troupe's actors inside the test process, so
that process is patched first, like production (TROUPE_TEST_GEVENT=1). tests/unit
and tests/e2e drive real processes from plain threads and the official asyncio
SDK, which must not run patched. `python -m tests` runs the two groups apart.
"""
import os

if os.environ.get("TROUPE_TEST_GEVENT") == "1":
    from gevent import monkey

    monkey.patch_all()

import pytest  # noqa: E402

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


@pytest.fixture
def dead_port():
    """A loopback port that refuses connections for the whole test; no other process can take it meanwhile."""
    with refused_port() as port:
        yield port
