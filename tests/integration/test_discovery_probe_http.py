from gevent import monkey
monkey.patch_all()
# The health probe over Streamable HTTP and legacy SSE against a real FastMCP peer.

import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

from actors.config import HttpSpec, ServerConfig  # noqa: E402
from actors.discovery.probe import probe  # noqa: E402
from tests.support import PYTHON, ROOT, free_port, wait_until  # noqa: E402

PEER_START_TIMEOUT = 30.0
PROBE_TIMEOUT = 10.0
PEER_TOOLS = 2  # tests/servers/fastmcp_http_min.py: echo, progress_then_drop


def _listening(proc, port, log):
    if proc.poll() is not None:
        raise AssertionError(f"peer exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    """transport → URL of a running fastmcp_http_min peer."""
    logs = tmp_path_factory.mktemp("probe-peers")
    urls, procs = {}, []
    try:
        for transport, path in (("http", "/mcp"), ("sse", "/sse")):
            port = free_port()
            log = logs / f"{transport}.log"
            with open(log, "wb") as out:  # a file, not a pipe: a chatty peer cannot block on it
                proc = subprocess.Popen([PYTHON, "-m", "tests.servers.fastmcp_http_min", "--port", str(port),
                                         "--transport", transport], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                        env=dict(os.environ))
            procs.append(proc)
            wait_until(lambda: _listening(proc, port, log), timeout=PEER_START_TIMEOUT, interval=0.05,
                       message=f"fastmcp {transport} peer")
            urls[transport] = f"http://127.0.0.1:{port}{path}"
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def http_config(url, transport="streamable-http"):
    return ServerConfig(name="remote", transport=transport, http=HttpSpec(url))


def test_streamable_http_probe_counts_tools(peers):
    assert probe(http_config(peers["http"]), PROBE_TIMEOUT) == (True, f"ok: {PEER_TOOLS} tools", PEER_TOOLS)


def test_sse_probe_counts_tools(peers):
    assert probe(http_config(peers["sse"], "sse"), PROBE_TIMEOUT) == (True, f"ok: {PEER_TOOLS} tools", PEER_TOOLS)


def test_unreachable_url_is_unhealthy_quickly():
    started = time.monotonic()
    ok, detail, tools = probe(http_config(f"http://127.0.0.1:{free_port()}/mcp"), PROBE_TIMEOUT)
    assert (ok, tools) == (False, 0) and detail
    assert time.monotonic() - started < PROBE_TIMEOUT
