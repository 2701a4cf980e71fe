from gevent import monkey
monkey.patch_all()
# The health probe over Streamable HTTP and legacy SSE against a real FastMCP peer.

import time  # noqa: E402

import pytest  # noqa: E402

from actors.config import HttpSpec, ServerConfig  # noqa: E402
from actors.discovery.probe import probe  # noqa: E402
from tests.support import PYTHON  # noqa: E402
from tests.support.ports import start_announced, stop  # noqa: E402

PEER_START_TIMEOUT = 30.0
PROBE_TIMEOUT = 10.0
PEER_TOOLS = 2  # tests/servers/fastmcp_http_min.py: echo, progress_then_drop


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    """transport → URL of a running fastmcp_http_min peer (port 0, announced: no race for it)."""
    logs = tmp_path_factory.mktemp("probe-peers")
    urls, procs = {}, []
    try:
        for transport, path in (("http", "/mcp"), ("sse", "/sse")):
            proc, port = start_announced([PYTHON, "-m", "tests.servers.fastmcp_http_min", "--port", "0",
                                          "--transport", transport], logs / f"{transport}.log",
                                         timeout=PEER_START_TIMEOUT)
            procs.append(proc)
            urls[transport] = f"http://127.0.0.1:{port}{path}"
        yield urls
    finally:
        for proc in procs:
            stop(proc)


def http_config(url, transport="streamable-http"):
    return ServerConfig(name="remote", transport=transport, http=HttpSpec(url))


def test_streamable_http_probe_counts_tools(peers):
    assert probe(http_config(peers["http"]), PROBE_TIMEOUT) == (True, f"ok: {PEER_TOOLS} tools", PEER_TOOLS)


def test_sse_probe_counts_tools(peers):
    assert probe(http_config(peers["sse"], "sse"), PROBE_TIMEOUT) == (True, f"ok: {PEER_TOOLS} tools", PEER_TOOLS)


def test_unreachable_url_is_unhealthy_quickly(dead_port):
    started = time.monotonic()
    ok, detail, tools = probe(http_config(f"http://127.0.0.1:{dead_port}/mcp"), PROBE_TIMEOUT)
    assert (ok, tools) == (False, 0) and detail
    assert time.monotonic() - started < PROBE_TIMEOUT
