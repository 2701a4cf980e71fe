"""Bounded soak and fault run: drive calls through troupe while killing and hanging backends.

    python scripts/soak.py --duration 60 --rate 50 [--backends 4] [--out soak.json]

Runs troupe (stdio, flat mode) in front of N test backends, sends tools/call at the
given rate for the given duration while SIGKILLing a random backend every few
seconds and freezing one (SIGSTOP, then SIGCONT) so its calls time out. Then it
waits for every answer and prints: calls sent, answered ok, answered with error,
unanswered (must be 0), restarts, RSS and open-fd growth of troupe, and child
processes left after troupe's shutdown (must be 0). Exit code 1 if either is not 0.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.troupe import Troupe, children_of, pid_alive, server, write_config  # noqa: E402

CALL_TIMEOUT = 2.0  # per-request timeout troupe applies to each backend
DRAIN_WAIT = CALL_TIMEOUT + 8.0  # after the last send, every answer must be in by then


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def run(duration: float, rate: float, backends: int, kill_every: float, freeze_every: float, seed: int) -> dict:
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="troupe-soak-"))
    names = [f"b{i}" for i in range(backends)]
    config = write_config(tmp, [server(n, "tests.servers.echo", timeout=CALL_TIMEOUT,
                                       restart={"intensity": 1000, "period": 60, "min_backoff": 0.05,
                                                "max_backoff": 0.5}) for n in names], mode="flat")
    t = Troupe(config, env={"TROUPE_CONFIG_DIR": str(tmp / "troupe-config")})  # its pins stay in tmp
    figures: dict = {}
    try:
        t.initialize()
        t.request("tools/list", timeout=30)
        time.sleep(0.5)  # let start-up allocations settle before the baseline reading
        rss0, fds0 = rss_kb(t.proc.pid), fd_count(t.proc.pid)
        sent: list[int] = []
        stop = threading.Event()

        def chaos() -> None:
            next_kill, next_freeze = time.monotonic() + kill_every, time.monotonic() + freeze_every
            while not stop.wait(0.1):
                now = time.monotonic()
                if now >= next_kill:
                    next_kill = now + kill_every
                    _signal_backend(t, rng.choice(names), signal.SIGKILL)
                if now >= next_freeze:
                    next_freeze = now + freeze_every
                    pid = _signal_backend(t, rng.choice(names), signal.SIGSTOP)
                    if pid:
                        threading.Timer(CALL_TIMEOUT * 1.5, _safe_kill, (pid, signal.SIGCONT)).start()

        chaos_thread = threading.Thread(target=chaos, daemon=True)
        chaos_thread.start()
        interval, deadline = 1.0 / rate, time.monotonic() + duration
        next_send = time.monotonic()
        while time.monotonic() < deadline:
            name = rng.choice(names)
            if rng.random() < 0.2:
                params = {"name": f"{name}__sleep", "arguments": {"seconds": 0.05}}
            else:
                params = {"name": f"{name}__echo", "arguments": {"text": f"m{len(sent)}"}}
            sent.append(t.send_request("tools/call", params))
            next_send += interval
            time.sleep(max(0.0, next_send - time.monotonic()))
        stop.set()
        chaos_thread.join()
        ok = err = 0
        unanswered = []
        drain_deadline = time.monotonic() + DRAIN_WAIT
        for rid in sent:
            try:
                answer = t.wait_response(rid, timeout=max(0.01, drain_deadline - time.monotonic()))
            except AssertionError:
                unanswered.append(rid)
                continue
            if "error" in answer or answer["result"].get("isError"):
                err += 1
            else:
                ok += 1
        status = t.status()
        rss1, fds1 = rss_kb(t.proc.pid), fd_count(t.proc.pid)
        kids = children_of(t.proc.pid)
        figures = {
            "duration_s": duration, "rate_per_s": rate, "backends": backends,
            "sent": len(sent), "answered_ok": ok, "answered_error": err, "unanswered": len(unanswered),
            "restarts": sum(s["restarts"] for s in status["servers"]),
            "rss_kb_start": rss0, "rss_kb_end": rss1, "rss_growth_kb": rss1 - rss0,
            "fds_start": fds0, "fds_end": fds1, "fd_growth": fds1 - fds0,
        }
    finally:
        kids = children_of(t.proc.pid) if t.proc.poll() is None else []
        for pid in kids:  # a frozen backend must be able to die
            _safe_kill(pid, signal.SIGCONT)
        code = t.close(timeout=15)
    deadline = time.monotonic() + 5
    while any(pid_alive(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.05)
    figures["troupe_exit_code"] = code
    figures["children_left"] = sum(1 for k in kids if pid_alive(k))
    return figures


def _signal_backend(t: Troupe, name: str, sig: int) -> int | None:
    try:
        pid = t.server_status(name).get("pid")
    except AssertionError:
        return None
    if pid:
        _safe_kill(pid, sig)
    return pid


def _safe_kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    p.add_argument("--rate", type=float, default=50.0, help="calls per second")
    p.add_argument("--backends", type=int, default=4)
    p.add_argument("--kill-every", type=float, default=3.0, help="seconds between SIGKILLs")
    p.add_argument("--freeze-every", type=float, default=7.0, help="seconds between SIGSTOPs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", help="write the figures as JSON here")
    args = p.parse_args()
    figures = run(args.duration, args.rate, args.backends, args.kill_every, args.freeze_every, args.seed)
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=2))
    return 0 if figures["unanswered"] == 0 and figures["children_left"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
