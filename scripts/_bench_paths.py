"""How scripts/bench.py launches each path: backends, troupe (stdio or HTTP in front), the FastMCP proxy."""
from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from _bench_rpc import LOGS, PYTHON, ROOT, HttpRpc, Proc, StdioRpc, free_port, wait_http

PEERS = Path(os.environ.get("TROUPE_PEERS_DIR", ROOT / ".peers"))
EVERYTHING = PEERS / "node_modules" / ".bin" / "mcp-server-everything"
# mcp-proxy (a peer stdio→HTTP bridge) lives in a venv of its own: 0.13 needs mcp<2 (.ci/run installs it).
MCP_PROXY = PEERS / "mcp-proxy-venv" / "bin" / "mcp-proxy"
STARTUP_WAIT = 120.0  # troupe's first tools/list waits this long at most for its backends to connect
BENCH_RATE = {"per_minute": 10_000_000, "burst": 1_000_000}  # TROUPE_BENCH_RATE=1: a limit never reached


@dataclass(frozen=True)
class Backend:
    """A stdio MCP server to measure against, and the cheap tool call that exercises it."""

    label: str
    cmd: tuple
    tool: str
    arguments: dict = field(default_factory=dict)


def bench_backend(tools: int = 0) -> Backend:
    """tests/servers/bench_backend: single-threaded Python, answers at once."""
    cmd = (PYTHON, "-m", "tests.servers.bench_backend", *(("--tools", str(tools)) if tools else ()))
    return Backend("bench_backend", cmd, "echo", {"text": "hello"})


def everything_stdio() -> Backend:
    """server-everything (the TypeScript SDK's reference server) over stdio."""
    return Backend("server-everything", (str(EVERYTHING), "stdio"), "echo", {"message": "hello"})


def have_everything() -> bool:
    return EVERYTHING.exists()


def compile_sources() -> tuple[float, bool]:
    """Bytecode for troupe and the test servers, as an installed package has (pip compiles on install).

    With PYTHONDONTWRITEBYTECODE=1 a process started from the source tree would otherwise compile
    its ~270 modules on every start (~0.3 s), a cost no installed troupe pays. py_compile writes the
    .pyc files whatever that variable says, and every later import reads them. (seconds taken, ok)
    """
    t0 = time.perf_counter()
    done = subprocess.run([PYTHON, "-m", "compileall", "-q", "actors", "tests/servers"], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, done.returncode == 0


# ---------------------------------------------------------------- troupe

def stdio_entry(name: str, backend: Backend, prefix: str | None = None) -> dict:
    entry = {"name": name, "timeout": 60,
             "transport": {"type": "stdio", "stdio": {"command": backend.cmd[0], "args": list(backend.cmd[1:]),
                                                      "work_dir": str(ROOT)}}}
    if prefix is not None:
        entry["prefix"] = prefix
    return entry


def http_entry(name: str, url: str, prefix: str | None = None) -> dict:
    entry = {"name": name, "timeout": 60, "transport": {"type": "streamable-http", "streamable_http": {"url": url}}}
    if prefix is not None:
        entry["prefix"] = prefix
    return entry


def troupe_config(label: str, servers: list[dict], mode: str = "flat") -> Path:
    path = LOGS / f"troupe-{label}.yaml"
    serve: dict = {"mode": mode, "startup_wait": STARTUP_WAIT}
    if os.environ.get("TROUPE_BENCH_RATE") == "1":
        # Every call checked against two rate limits it never reaches (the anonymous clients' and
        # its server's): what an active limit adds to a call (actors/ratelimit).
        serve["rate"] = BENCH_RATE
        servers = [{**s, "rate": BENCH_RATE} for s in servers]
    path.write_text(yaml.safe_dump({"servers": servers, "serve": serve, "discovery": {"enabled": False}}))
    return path


def troupe_cmd(config: Path, *extra: str, python: tuple = (PYTHON,)) -> list[str]:
    # WARNING keeps troupe's logging (stderr, to a file here) out of the measured path, as in production.
    return [*python, "-m", "actors.main", "--config", str(config), "--log-level", "WARNING", *extra]


def troupe_stdio(label: str, config: Path, python: tuple = (PYTHON,)) -> StdioRpc:
    return StdioRpc(troupe_cmd(config, python=python), label=f"troupe-stdio-{label}")


def troupe_http(label: str, config: Path, timeout: float = 60.0) -> tuple[Proc, str]:
    proc = Proc(troupe_cmd(config, "--transport", "http", "--port", "0"), label=f"troupe-http-{label}", pipes=False)
    try:
        url = proc.wait_for_stderr(r"troupe: serving (http://\S+/mcp)", timeout).group(1)
    except Exception:
        proc.stop()
        raise
    return proc, url


# ---------------------------------------------------------------- FastMCP's proxy

def fastmcp_config(label: str, servers: dict) -> Path:
    """servers: name -> Backend (stdio) or URL (Streamable HTTP)."""
    entries = {}
    for name, target in servers.items():
        if isinstance(target, str):
            entries[name] = {"url": target, "transport": "http"}
        else:
            entries[name] = {"command": target.cmd[0], "args": list(target.cmd[1:]), "cwd": str(ROOT)}
    path = LOGS / f"fastmcp-{label}.json"
    path.write_text(json.dumps({"mcpServers": entries}))
    return path


def _fastmcp_cmd(config: Path, *extra: str) -> list[str]:
    return [PYTHON, str(ROOT / "scripts" / "_bench_fastmcp_proxy.py"), "--config", str(config), *extra]


def fastmcp_stdio(label: str, servers: dict) -> StdioRpc:
    return StdioRpc(_fastmcp_cmd(fastmcp_config(label, servers)), label=f"fastmcp-stdio-{label}")


def fastmcp_http(label: str, servers: dict, timeout: float = 60.0) -> tuple[Proc, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = Proc(_fastmcp_cmd(fastmcp_config(label, servers), "--transport", "http", "--port", str(port)),
                label=f"fastmcp-http-{label}", pipes=False)
    try:
        wait_http(url, timeout, proc)
    except Exception:
        proc.stop()
        raise
    return proc, url


# ---------------------------------------------------------------- mcp-proxy

def have_mcp_proxy() -> bool:
    return MCP_PROXY.exists()


def mcp_proxy_http(label: str, backend: Backend) -> tuple[Proc, str]:
    """mcp-proxy in front of one stdio backend, Streamable HTTP at /mcp; returned at once (not waited for).

    It spawns the backend as its own child (same process group: Proc.stop ends both) and opens its
    port only once that backend has answered initialize.
    """
    port = free_port()
    cmd = [str(MCP_PROXY), "--host", "127.0.0.1", "--port", str(port), "--pass-environment", "--cwd", str(ROOT),
           "--log-level", "WARNING", "--", *backend.cmd]
    return Proc(cmd, label=f"mcp-proxy-{label}", pipes=False), f"http://127.0.0.1:{port}/mcp"


# ---------------------------------------------------------------- server-everything over HTTP

def everything_http(timeout: float = 30.0) -> tuple[Proc, str]:
    """server-everything's Streamable HTTP on a free loopback port (it binds all interfaces; the port is ours)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    proc = Proc([str(EVERYTHING), "streamableHttp"], label="everything-http", env={"PORT": str(port)}, pipes=False)
    try:
        wait_http(url, timeout, proc)
    except Exception:
        proc.stop()
        raise
    return proc, url


def http_client(url: str) -> HttpRpc:
    client = HttpRpc(url)
    client.initialize()
    return client
