"""Section 6 of scripts/bench.py: troupe as a cluster on one Redis (issue 16).

- The hop to a server's owner: the same fast stdio backend called through one instance, once as a
  `replicated` server it runs itself and once as a `single` server another instance owns, so the
  call crosses to the owner over HTTP. Ratio of p50s, relayed to local.
- Scale-out: stateless (2026-07-28) callers through HAProxy round-robin over three instances,
  against the same callers on one instance. On this 2-core machine three troupes and their
  backends share two cores: the figure shows the shape of the curve, not what more cores give.
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from pathlib import Path

import requests
import yaml

from _bench_modern import ModernHttpRpc
from _bench_paths import bench_backend, stdio_entry, troupe_config, troupe_http
from _bench_report import Report, ms, ratio
from _bench_rpc import LOGS, BenchError, free_port, time_calls, wait_http
from _bench_throughput import _rounds

def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _redis() -> tuple[subprocess.Popen, str]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise BenchError("redis-server is not installed (.ci/run installs Debian's)")
    port = free_port()
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"redis://127.0.0.1:{port}/0"


def _cluster_config(label: str, redis: str, allowed_host: str | None = None) -> Path:
    backend = bench_backend()
    servers = [{**stdio_entry("here", backend), "placement": "replicated", "pin": False},
               {**stdio_entry("single", backend), "placement": "single", "pin": False}]
    path = troupe_config(label, servers)
    data = yaml.safe_load(path.read_text())
    data["cluster"] = {"redis": redis, "lease": 5}
    data.setdefault("serve", {})["json_response"] = True
    if allowed_host:
        data["serve"]["allowed_hosts"] = [allowed_host]
    path.write_text(yaml.safe_dump(data))
    return path


def _owned(url: str) -> list:
    return requests.get(url.removesuffix("/mcp") + "/status", timeout=10).json()["cluster"]["owned"]


def _all_ready(urls: list[str], deadline: float) -> None:
    while time.monotonic() < deadline:
        states = [s["state"] for u in urls
                  for s in requests.get(u.removesuffix("/mcp") + "/status", timeout=10).json()["servers"]]
        if states and all(s == "ready" for s in states):
            return
        time.sleep(0.2)
    raise BenchError("the cluster's servers were not ready in time")


def cluster(settings, report: Report) -> dict:
    print("\n== 6. cluster: the hop to an owner, and three instances against one", flush=True)
    section = "6 cluster [bench_backend stdio]"
    with contextlib.ExitStack() as stack:
        redis, redis_url = _redis()
        stack.callback(_stop, redis)
        port = free_port()
        config = _cluster_config("cluster", redis_url, f"127.0.0.1:{port}")
        troupes = []
        for i in range(3):
            proc, url = troupe_http(f"cluster-{i}", config)
            stack.callback(proc.stop)
            troupes.append((proc, url))
        _all_ready([u for _, u in troupes], time.monotonic() + 60)
        # the hop: through an instance that does not own `single`
        caller = next(u for _, u in troupes if "single" not in _owned(u))
        client = ModernHttpRpc(caller)
        stack.callback(client.close)
        count, warmup = settings.latency_block * 2, settings.latency_warmup
        local = time_calls(lambda: client.call("here__echo", {"text": "hi"}), count, warmup)
        relayed = time_calls(lambda: client.call("single__echo", {"text": "hi"}), count, warmup)
        hop = ratio(relayed["p50_ms"], local["p50_ms"])
        report.row(section, "call, server on this instance", ms(local["p50_ms"]) + " p50", "baseline")
        report.row(section, "call, relayed to its owner", ms(relayed["p50_ms"]) + " p50",
                   f"{hop:.2f}× local (+{relayed['p50_ms'] - local['p50_ms']:.3f} ms)")
        # scale-out: HAProxy round-robin over the three, against one of them alone
        haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
        cfg_path = LOGS / "haproxy-cluster.cfg"
        backends = "\n".join(f"  server t{i} {u.split('//', 1)[1].removesuffix('/mcp')}"
                             for i, (_, u) in enumerate(troupes))
        with open(cfg_path, "w") as fh:
            fh.write(f"defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n"
                     f"frontend f\n  bind 127.0.0.1:{port}\n  default_backend b\n"
                     f"backend b\n  balance roundrobin\n{backends}\n")
        lb = subprocess.Popen([haproxy, "-f", cfg_path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        stack.callback(_stop, lb)
        lb_url = f"http://127.0.0.1:{port}/mcp"
        wait_http(lb_url, 10)
        one, three = "1 instance", "3 instances behind HAProxy"
        figures = _rounds({one: (lambda: ModernHttpRpc(troupes[0][1]), None),
                           three: (lambda: ModernHttpRpc(lb_url), None)}, "here__echo", {"text": "hi"}, settings)
    scale = ratio(figures[three]["calls_per_s"], figures[one]["calls_per_s"])
    report.row(section, f"calls/s, {one}", f"{figures[one]['calls_per_s']:.0f} calls/s", "baseline")
    report.row(section, f"calls/s, {three}", f"{figures[three]['calls_per_s']:.0f} calls/s",
               f"{scale:.2f}× one instance (2 cores for all)")
    return {"hop": {"local": local, "relayed": relayed, "ratio_p50": hop},
            "scale": {"paths": figures, "ratio_3_vs_1": scale}}
