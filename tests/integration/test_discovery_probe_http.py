from gevent import monkey
monkey.patch_all()
# The health probe over Streamable HTTP and legacy SSE against a real FastMCP peer.

import time  # noqa: E402

from actors.settings.config import HttpSpec, ServerConfig  # noqa: E402
from actors.discovery.probe import probe  # noqa: E402

PROBE_TIMEOUT = 10.0
PEER_TOOLS = 2  # tests/servers/fastmcp_http_min.py (the peer fixture: conftest.py): echo, progress_then_drop


def http_config(url, transport="streamable-http"):
    return ServerConfig(name="remote", transport=transport, http=HttpSpec(url))


def test_streamable_http_probe_counts_tools(peer):
    assert probe(http_config(peer("fastmcp-http")), PROBE_TIMEOUT) == (True, f"ok: {PEER_TOOLS} tools", PEER_TOOLS)


def test_sse_probe_counts_tools(peer):
    expected = (True, f"ok: {PEER_TOOLS} tools", PEER_TOOLS)
    assert probe(http_config(peer("fastmcp-sse"), "sse"), PROBE_TIMEOUT) == expected


def test_unreachable_url_is_unhealthy_quickly(dead_port):
    started = time.monotonic()
    ok, detail, tools = probe(http_config(f"http://127.0.0.1:{dead_port}/mcp"), PROBE_TIMEOUT)
    assert (ok, tools) == (False, 0) and detail
    assert time.monotonic() - started < PROBE_TIMEOUT
