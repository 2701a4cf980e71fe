"""Child of scripts/trace_bench.py --hub: how long troupe's span export holds the gevent hub.

Gevent-patched as troupe runs, it starts actors.ops.tracing.Tracing against the collector URL it
is given (a real receiver in the parent process, or a socket that never answers), ends spans in
bursts like a busy troupe would, and meanwhile a ticker greenlet asks to wake every millisecond:
how late it wakes is how long something held the hub. Prints one JSON line: the ticker's lag
(p50, p99, max) and the time to encode one batch of spans.

Usage: python scripts/_bench_trace_hub.py URL|none [--spans 5000] [--burst 256]
(`none`: the ticker alone for as long, the machine's own lag to compare with)
"""
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import gevent  # noqa: E402
import orjson  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actors.ops.trace_export import MAX_EXPORT_BATCH  # noqa: E402
from actors.ops.tracing import Tracing  # noqa: E402

TICK_S = 0.001


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--spans", type=int, default=5000)
    parser.add_argument("--burst", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=2.0)
    args = parser.parse_args()
    if args.url == "none":
        lags = []
        began = time.perf_counter()
        while time.perf_counter() - began < args.spans / args.burst * 0.05 + 2.5:
            t0 = time.perf_counter()
            gevent.sleep(TICK_S)
            lags.append(time.perf_counter() - t0 - TICK_S)
        s = sorted(lags)
        print(orjson.dumps({"ticks": len(s), "lag_p50_ms": s[len(s) // 2] * 1000,
                            "lag_p99_ms": s[int(len(s) * 0.99)] * 1000, "lag_max_ms": s[-1] * 1000}).decode())
        return
    tracing = Tracing(args.url, "hub-bench", args.timeout, "stdio")
    lags: list[float] = []
    running = True

    def ticker() -> None:
        while running:
            t0 = time.perf_counter()
            gevent.sleep(TICK_S)
            lags.append(time.perf_counter() - t0 - TICK_S)
    tick = gevent.spawn(ticker)
    attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "b__echo", "troupe.server": "b",
                  "network.transport": "pipe", "jsonrpc.request.id": "1", "troupe.outcome": "ok"}
    made = 0
    began = time.perf_counter()
    while made < args.spans:
        for _ in range(min(args.burst, args.spans - made)):
            tracing.recorder.start("tools/call b__echo", SpanKind.SERVER, None, dict(attributes)).end()
            made += 1
        gevent.sleep(0.05)  # calls arrive in bursts; the export greenlet runs in between
    gevent.sleep(2.5)  # the last batches leave (schedule delay 1 s) or time out
    elapsed = time.perf_counter() - began
    running = False
    tick.join()

    spans: list = []  # troupe's span records, as its export takes them
    tracing.recorder.add_processor(SimpleNamespace(on_end=spans.append, takes_records=True))
    for _ in range(MAX_EXPORT_BATCH):
        tracing.recorder.start("tools/call b__echo", SpanKind.SERVER, None, dict(attributes)).end()
    t0 = time.perf_counter()
    tracing.encoder.request(spans)
    encode_ms = (time.perf_counter() - t0) * 1000
    report = tracing.report()
    tracing.stop(1.0)
    s = sorted(lags)
    print(orjson.dumps({"ticks": len(s), "lag_p50_ms": s[len(s) // 2] * 1000,
                        "lag_p99_ms": s[int(len(s) * 0.99)] * 1000, "lag_max_ms": s[-1] * 1000,
                        "encode_batch_ms": encode_ms, "batch": MAX_EXPORT_BATCH,
                        "spans": made, "elapsed_s": elapsed, "export": report}).decode())


if __name__ == "__main__":
    main()
