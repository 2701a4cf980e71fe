"""These tests run troupe's actors in-process: the process must be gevent-patched."""
from gevent import monkey

if not monkey.is_module_patched("threading"):
    raise RuntimeError("run these suites patched: `python -m tests`, or TROUPE_TEST_GEVENT=1 pytest -p no:anyio ...")

import subprocess  # noqa: E402

import pytest  # noqa: E402

from tests.support import PYTHON, peer_bin  # noqa: E402
from tests.support.ports import start_announced, start_with_port_retry, stop  # noqa: E402

PEER_START_TIMEOUT = 30.0  # how long a peer may take to listen


@pytest.fixture(scope="session")
def peer(tmp_path_factory):
    """peer(kind) → base URL of a running peer of that kind, started once per session.

    Each on its own loopback port with no race for it (tests/support/ports.py); shared by the
    modules here because a FastMCP peer costs seconds of CPU to start.
    """
    running: dict[str, str] = {}
    procs: list[subprocess.Popen] = []
    logs = tmp_path_factory.mktemp("peers")

    def start(kind: str) -> str:
        if kind in running:
            return running[kind]
        log = logs / f"{kind}.log"
        if kind.startswith("everything-"):  # takes a fixed PORT from its environment
            mode, path = {"everything-http": ("streamableHttp", "/mcp"), "everything-sse": ("sse", "/sse")}[kind]
            argv = [peer_bin("mcp-server-everything"), mode]
            proc, port = start_with_port_retry(lambda port: (argv, {"PORT": str(port)}), log,
                                               timeout=PEER_START_TIMEOUT)
        else:  # ours: bind port 0 and announce it
            fastmcp_min = [PYTHON, "-m", "tests.servers.fastmcp_http_min", "--port", "0"]
            argv, path = {
                "fastmcp-http": (fastmcp_min, "/mcp"),
                "fastmcp-json": ([*fastmcp_min, "--json"], "/mcp"),
                "fastmcp-sse": ([*fastmcp_min, "--transport", "sse"], "/sse"),
                "fastmcp-demo": ([PYTHON, "-m", "tests.servers.fastmcp_demo", "--http", "0"], "/mcp"),
            }[kind]
            proc, port = start_announced(argv, log, timeout=PEER_START_TIMEOUT)
        procs.append(proc)
        running[kind] = f"http://127.0.0.1:{port}{path}"
        return running[kind]

    yield start
    for proc in procs:
        stop(proc)
