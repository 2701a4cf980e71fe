"""e2e tests use asyncio peers (the official SDK): they need an unpatched process."""
import pytest
from gevent import monkey

from tests.support.browser import Browser
from tests.support.troupe import Troupe, TroupeHttp, write_config

if monkey.is_module_patched("threading"):
    raise RuntimeError("tests/e2e must run unpatched: `python -m tests`, or plain pytest on tests/e2e")


@pytest.fixture
def http_troupe(tmp_path):
    """troupe over HTTP on a free port; each one is stopped (cleanly) after the test."""
    started = []

    def make(servers, *args, **serve):
        t = TroupeHttp(write_config(tmp_path, servers, **serve), *args)
        started.append(t)
        return t
    yield make
    for t in started:
        assert t.stop() == 0


@pytest.fixture(scope="module")
def browser():
    """One headless chromium per test module (the dashboard tests)."""
    b = Browser()
    yield b
    b.close()


@pytest.fixture
def make(tmp_path):
    """troupe over stdio, flat, DEBUG logs, initialized and listed; each is closed after the test.
    `start(servers, *args, **serve)`."""
    started: list[Troupe] = []

    def start(servers, *args, **serve) -> Troupe:
        t = Troupe(write_config(tmp_path, servers, mode="flat", **serve), "--log-level", "DEBUG", *args)
        started.append(t)
        t.initialize()
        t.request("tools/list", timeout=30)
        return t

    yield start
    for t in started:
        t.close()


def error_text(response: dict) -> str:
    """The text of a tool result that must be an error."""
    result = response["result"]
    assert result.get("isError") is True, response
    return result["content"][0]["text"]
