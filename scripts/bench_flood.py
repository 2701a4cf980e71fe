#!/usr/bin/env python
"""What a reader that never reads costs troupe while a server floods (issue 26, item 1), in one run.

One troupe (HTTP, flat) in front of tests/servers/flood.py and tests/servers/echo.py. First a calm
run: another client calls echo every 50 ms. Then, for each consumer that can fall behind, a flood
of ~`--rate` MiB/s for `--seconds` toward a reader that never reads, the other client calling as in
the calm run:

  events   an /events reader; the server floods log notifications
  session  a session's GET stream at log level debug; log notifications
  post     a handshake-era POST's SSE stream; progress notifications to its call
  modern   a 2026-07-28 POST's SSE stream; progress notifications to its call

Printed per consumer: troupe's RSS growth over the flood (peak minus start, in MiB, and the peak
as a ratio to the calm run's RSS), the other client's call p50 as a ratio to the calm p50, and
what troupe dropped (from /status). serve.stream_buffer_bytes bounds each reader's buffer (4 MiB).

Usage: python scripts/bench_flood.py [--seconds 10] [--rate 10] [--out flood-bench.json]
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
import time
import urllib.request
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file

from _bench_paths import http_client, troupe_config, troupe_http  # noqa: E402
from _bench_rpc import PYTHON, ROOT, percentiles, rss_kib, stop_all  # noqa: E402

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench-flood", "version": "1"}}
CALL_EVERY_S = 0.05
KIND = {"events": "log", "session": "log", "post": "progress", "modern": "progress"}


def entry(name: str, module: str) -> dict:
    return {"name": name, "timeout": 120, "pin": False,
            "transport": {"type": "stdio", "stdio": {"command": PYTHON, "args": ["-m", module], "work_dir": str(ROOT)}}}


def stalled(url: str, request: bytes) -> socket.socket:
    """Send `request` and never read (a small receive window: the kernel holds little)."""
    host, port = url.split("//")[1].split("/")[0].split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(request.replace(b"{host}", f"{host}:{port}".encode()))
    return sock


def raw(method: str, path: str, headers: dict, body: dict | None = None) -> bytes:
    data = orjson.dumps(body) if body is not None else b""
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    length = f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n" if body is not None else ""
    return f"{method} {path} HTTP/1.1\r\nHost: {{host}}\r\n{length}{head}\r\n".encode() + data


def text(answer: dict) -> str:
    return answer["content"][0]["text"]  # HttpRpc.request gives the result


def streams(base: str) -> dict:
    with urllib.request.urlopen(base + "/status", timeout=10) as resp:
        return json.loads(resp.read())["streams"]


def calls_while(other, pid: int, keep_on) -> tuple[list[float], int]:
    """The other client's echo latencies (one call every CALL_EVERY_S) and troupe's peak RSS (KiB)."""
    samples, peak = [], rss_kib(pid)
    while keep_on():
        t0 = time.perf_counter()
        assert text(other.request("tools/call", {"name": "echo__echo", "arguments": {"text": "x"}})) == "x"
        samples.append(time.perf_counter() - t0)
        peak = max(peak, rss_kib(pid))
        time.sleep(CALL_EVERY_S)
    return samples, peak


def flooding(other):
    def running() -> bool:
        return orjson.loads(text(other.request("tools/call", {"name": "flood__flood_state", "arguments": {}})))[
            "running"] > 0
    return running


def reader_for(kind: str, url: str, args: dict) -> socket.socket:
    if kind == "events":
        return stalled(url, raw("GET", "/events", {"Accept": "text/event-stream"}))
    flooded = http_client(url)
    if kind == "session":
        flooded.request("logging/setLevel", {"level": "debug"})
        return stalled(url, raw("GET", "/mcp", {"Accept": "text/event-stream", "MCP-Protocol-Version": "2025-11-25",
                                                "Mcp-Session-Id": flooded.headers["Mcp-Session-Id"]}))
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "flood__flood_progress", "arguments": args, "_meta": {"progressToken": "p"}}}
    if kind == "post":
        return stalled(url, raw("POST", "/mcp", {"Accept": "application/json, text/event-stream",
                                                 "MCP-Protocol-Version": "2025-11-25",
                                                 "Mcp-Session-Id": flooded.headers["Mcp-Session-Id"]}, body))
    body["params"]["_meta"] = {**META, "progressToken": "p"}
    return stalled(url, raw("POST", "/mcp", {"Accept": "application/json, text/event-stream",
                                             "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call",
                                             "Mcp-Name": "flood__flood_progress"}, body))


def measure(seconds: float, rate: float) -> dict:
    config = troupe_config("flood", [entry("flood", "tests.servers.flood"), entry("echo", "tests.servers.echo")])
    proc, url = troupe_http("flood", config)
    base = url[: -len("/mcp")]
    other = http_client(url)
    for _ in range(20):  # warm-up
        other.request("tools/call", {"name": "echo__echo", "arguments": {"text": "x"}})
    ends = time.monotonic() + max(3.0, seconds / 2)
    calm_samples, calm_rss = calls_while(other, proc.pid, lambda: time.monotonic() < ends)
    calm = percentiles(calm_samples)
    out: dict = {"calm": {**calm, "rss_mib": calm_rss / 1024}, "floods": {}}
    args = {"seconds": seconds, "mb_per_s": rate, "kb": 64}
    for kind in ("events", "session", "post", "modern"):
        start = rss_kib(proc.pid)
        reader = reader_for(kind, url, args)
        if kind in ("events", "session"):
            time.sleep(0.2)  # the stream is open before the flood starts (an observation, not a wait on state)
            other.request("tools/call", {"name": "flood__flood_logs", "arguments": args})
        else:
            running = flooding(other)
            deadline = time.monotonic() + 10
            while not running() and time.monotonic() < deadline:
                time.sleep(0.05)
        samples, peak = calls_while(other, proc.pid, flooding(other))
        figures = streams(base).get(kind, {})
        reader.close()
        p50 = percentiles(samples)["p50_ms"]
        out["floods"][kind] = {"rss_start_mib": start / 1024, "rss_peak_mib": peak / 1024,
                               "rss_growth_mib": (peak - start) / 1024, "rss_peak_vs_calm": peak / calm_rss,
                               "p50_ms": p50, "p50_vs_calm": p50 / calm["p50_ms"], "calls": len(samples),
                               "dropped": figures.get("dropped", {}).get(KIND[kind], 0),
                               "dropped_mib": figures.get("dropped_bytes", 0) / 2**20}
    proc.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each flood")
    parser.add_argument("--rate", type=float, default=10.0, help="MiB/s the server floods")
    parser.add_argument("--out", type=Path, default=None, help="write every figure as JSON here")
    args = parser.parse_args(argv)
    try:
        results = measure(args.seconds, args.rate)
    finally:
        stop_all()
    calm = results["calm"]
    print(f"calm: other client's p50 {calm['p50_ms']:.2f} ms over {calm['n']} calls; troupe RSS "
          f"{calm['rss_mib']:.0f} MiB")
    print(f"{'reader':<9} {'RSS growth':>11} {'peak/calm':>10} {'p50 ms':>8} {'p50/calm':>9} {'dropped':>9} "
          f"{'MiB dropped':>12}")
    for kind, f in results["floods"].items():
        print(f"{kind:<9} {f['rss_growth_mib']:>8.1f} MiB {f['rss_peak_vs_calm']:>9.2f}x {f['p50_ms']:>8.2f} "
              f"{f['p50_vs_calm']:>8.2f}x {f['dropped']:>9} {f['dropped_mib']:>12.1f}")
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
