"""The modern-era (MCP 2026-07-28) client of scripts/bench.py, and the CPU time a process spends per call.

troupe serves both eras on one POST /mcp; the benchmark sends the same tools/call both ways and
compares what each costs troupe's HTTP front (the legacy client is _bench_rpc.HttpRpc).
"""
from __future__ import annotations

from pathlib import Path

from _bench_rpc import BenchError, HttpRpc, check_reply, list_all_tools, parse_body

MODERN = "2026-07-28"
# The envelope every modern request carries: version and capabilities are required, clientInfo is
# what an SDK client sends too (so the body is as big as a real one's).
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "troupe-bench", "version": "1"}}
# Modern over legacy through troupe's HTTP front, in the same run (issue 15): p50 added and CPU per call
# at most 1.0×, calls/s at least 1.0×. No noise margin, as for every other target of the benchmark:
# on a busy machine a run can miss by noise, so compare runs.
MODERN_VS_LEGACY_TARGET = 1.0
# Which body field a name-bearing method mirrors in Mcp-Name (the spec's routing headers).
NAME_FIELD = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


class ModernHttpRpc(HttpRpc):
    """Stateless 2026-07-28 requests over one keep-alive connection: no initialize and no session;
    each POST carries the `_meta` envelope and repeats its version, method and name in headers."""

    def __init__(self, url: str, timeout: float = 30.0):
        super().__init__(url, timeout)
        self.headers["MCP-Protocol-Version"] = MODERN

    def request(self, method: str, params: dict | None = None) -> dict:
        rid = next(self._ids)
        params = {**(params or {}), "_meta": META}
        headers = {**self.headers, "Mcp-Method": method}
        field = NAME_FIELD.get(method)
        if field is not None and isinstance(params.get(field), str):
            # ASCII names only here (the bench's tools): a non-ASCII one would travel base64-encoded.
            headers["Mcp-Name"] = params[field]
        status, ctype, body, resp = self._post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
                                               headers)
        if status != 200:
            raise BenchError(f"HTTP {status} for modern {method}: {body[:300]!r}")
        if resp.getheader("Mcp-Session-Id"):  # then it took the legacy path: not what is measured
            raise BenchError(f"modern {method} was answered with a session")
        return check_reply(parse_body(ctype, body, rid), method)

    def initialize(self) -> dict:
        """What a client in auto mode does once per origin: server/discover, which must offer 2026-07-28
        (the only state a modern client keeps; every later request stands alone)."""
        result = self.request("server/discover")
        if MODERN not in result.get("supportedVersions", ()):
            raise BenchError(f"server/discover does not offer {MODERN}: {str(result)[:300]}")
        return result

    def list_tools(self) -> list[dict]:
        return list_all_tools(self.request)


def cpu_seconds(pid: int) -> float:
    """On-CPU time of every live thread of one process so far, in seconds (schedstat's nanoseconds:
    finer than /proc/PID/stat's 10 ms ticks, which a block of fast calls would round away)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError as exc:
        raise BenchError(f"no CPU figures for pid {pid}: {exc}") from exc
    for task in tasks:
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # the thread ended between the listing and the read
    return total / 1e9
