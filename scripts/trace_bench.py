#!/usr/bin/env python
"""What tracing costs per call, in one run: tools/call p50 to tests/servers/bench_backend three ways,

  direct   the backend alone (its own pipes): the floor
  off      through troupe (stdio in, stdio out), no telemetry: troupe's own added latency is off - direct
  on       through troupe with telemetry.otlp_endpoint set, exporting to a real OTLP/HTTP receiver
           (tests/support/otlp_receiver.py, in a process of its own): a SERVER and a CLIENT span per call,
           the client's traceparent in _meta taken in and troupe's passed on
  sampled  the same with OTEL_TRACES_SAMPLER=traceidratio, OTEL_TRACES_SAMPLER_ARG=0.1: one call in
           ten recorded and exported, the context still passed on for every call

and prints tracing's added p50 (on - off) as a ratio of troupe's own (off - direct); the goal is
under 0.10. Every call carries the same `_meta.traceparent`, so the bytes on the wire match. Rounds
alternate the ways, each starting the round in turn, so a machine busy with other work (or
with the export of the round before) slows them alike; the CPU each troupe used
per call is printed too (from /proc), and the spans the receiver took.

With --hub, it measures instead how long the export holds the gevent hub (scripts/_bench_trace_hub.py,
gevent-patched as troupe runs): a ticker greenlet's lag while 5000 spans are exported to the receiver,
to a collector that never answers, and with no tracing at all.

With --encode, it times the encoding of one batch of realistic spans (a traced tools/call's SERVER
and CLIENT span: ten attributes or so, a client's parent) per span: troupe's encoder
(actors/ops/otlp_encode.py) against the SDK's (a ReadableSpan each, then its OTLP encoder), and
checks both decode to the same request.

Usage: python scripts/trace_bench.py [--calls 3000] [--rounds 6] [--out trace-bench.json]
       python scripts/trace_bench.py --hub
       python scripts/trace_bench.py --encode
"""
from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the _bench_* helpers beside this file
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support.otlp_receiver

from _bench_paths import bench_backend, stdio_entry, troupe_cmd, troupe_stdio  # noqa: E402
from _bench_rpc import LOGS, PYTHON, Proc, StdioRpc, percentiles, stop_all  # noqa: E402
from tests.support.otlp_receiver import OtlpReceiver  # noqa: E402

GOAL = 0.10  # tracing's added p50 / troupe's own added p50


def _config(label: str, telemetry: dict | None) -> Path:
    data: dict = {"servers": [{**stdio_entry("b", bench_backend()), "pin": False}],
                  "serve": {"mode": "flat", "startup_wait": 60}, "discovery": {"enabled": False}}
    if telemetry is not None:
        data["telemetry"] = telemetry
    path = LOGS / f"trace-bench-{label}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _spans_taken(url: str) -> int:
    with urllib.request.urlopen(url + "/spans", timeout=10) as resp:
        return int(resp.read())


def measure(calls: int, rounds: int) -> dict:
    receiver = Proc([PYTHON, "-m", "tests.support.otlp_receiver", "--count-only"], label="otlp-receiver",
                    pipes=False)
    base = receiver.wait_for_stderr(r"serving (http://\S+)/v1/traces", 30).group(1)
    backend = bench_backend()
    direct = StdioRpc(list(backend.cmd), label="trace-bench-direct")
    off = troupe_stdio("trace-off", _config("off", None))
    telemetry = {"otlp_endpoint": base, "service_name": "trace-bench"}
    on = troupe_stdio("trace-on", _config("on", telemetry))
    sampled = StdioRpc(troupe_cmd(_config("sampled", telemetry)), label="troupe-stdio-trace-sampled",
                       env={"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"})
    troupes = {"off": off, "on": on, "sampled": sampled}
    try:
        for rpc in (direct, off, on, sampled):
            rpc.initialize()
        for rpc in troupes.values():
            assert any(t["name"] == "b__echo" for t in rpc.list_tools()), "troupe lists b__echo"
        meta = {"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"}
        args = {"name": "echo", "arguments": {"text": "hello"}, "_meta": meta}
        via = {"name": "b__echo", "arguments": {"text": "hello"}, "_meta": meta}
        ways = {"direct": lambda: direct.request("tools/call", args),
                "off": lambda: off.request("tools/call", via),
                "on": lambda: on.request("tools/call", via),
                "sampled": lambda: sampled.request("tools/call", via)}
        for fn in ways.values():  # warm-up
            for _ in range(max(50, calls // 10)):
                fn()
        samples: dict[str, list[float]] = {way: [] for way in ways}
        cpu = dict.fromkeys(troupes, 0.0)
        clock = time.perf_counter
        order = list(ways)
        for turn in range(rounds):
            # each way follows each other in turn: the one after `on` shares the cores with its export
            for way in order[turn % len(order):] + order[:turn % len(order)]:
                fn = ways[way]
                before = _cpu_s(troupes[way].pid) if way in troupes else 0.0
                for _ in range(calls // rounds):
                    t0 = clock()
                    fn()
                    samples[way].append(clock() - t0)
                if way in troupes:
                    cpu[way] += _cpu_s(troupes[way].pid) - before
        counted = len(samples["on"])
        status = orjson.loads(on.call("core_status", {})["content"][0]["text"]).get("tracing") or {}
        spans_wanted = 2 * counted  # a SERVER and a CLIENT span for each measured call of `on`
        deadline = time.monotonic() + 15
        while _spans_taken(base) < spans_wanted and time.monotonic() < deadline:
            time.sleep(0.1)
        return {"figures": {way: percentiles(s) for way, s in samples.items()},
                "cpu_ms_per_call": {way: cpu[way] / max(1, len(samples[way])) * 1000 for way in cpu},
                "tracing": status, "spans_received": _spans_taken(base)}
    finally:
        for rpc in (direct, off, on, sampled):
            rpc.stop()
        receiver.stop()


def hub() -> int:
    """The export's hold on the hub: no tracing, a receiver that answers, a collector that never does."""
    receiver = OtlpReceiver()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    child = Path(__file__).resolve().parent / "_bench_trace_hub.py"
    try:
        for label, url in (("no tracing", "none"), ("receiver", receiver.url + "/v1/traces"),
                           ("collector hangs", f"http://127.0.0.1:{hole.getsockname()[1]}/v1/traces")):
            out = subprocess.run([sys.executable, str(child), url], capture_output=True, text=True, timeout=120)
            if out.returncode != 0:
                print(f"{label}: failed\n{out.stderr[-2000:]}")
                return 1
            figures = orjson.loads(out.stdout.strip().splitlines()[-1])
            print(f"{label:<16} hub lag p50 {figures['lag_p50_ms']:.3f} ms, p99 {figures['lag_p99_ms']:.3f} ms, "
                  f"max {figures['lag_max_ms']:.3f} ms" + (f"; encode {figures['batch']} spans "
                                                           f"{figures['encode_batch_ms']:.1f} ms; export "
                                                           f"{figures['export']}" if "export" in figures else ""))
        print(f"receiver took {len(receiver.all())} spans")
    finally:
        receiver.stop()
        hole.close()
    return 0


def encode() -> int:
    """µs per span to encode a batch: troupe's encoder and the SDK's, on the same spans."""
    import timeit
    from types import SimpleNamespace

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from actors.ops.trace_export import MAX_EXPORT_BATCH
    from actors.ops.tracing import Tracing
    from tests.support.otlp_receiver import decode

    tracing = Tracing("http://127.0.0.1:1/v1/traces", "trace-bench", 0.5, "stdio")
    tracing.stop(0.1)  # its own export takes nothing: the spans are only encoded here
    records: list = []
    tracing.recorder.add_processor(SimpleNamespace(on_end=records.append, takes_records=True))
    client = {"traceparent": f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"}
    for rid in range(MAX_EXPORT_BATCH // 2):
        sink = tracing.served(SimpleNamespace(key="s1", view=SimpleNamespace(client_name="bench", profile=None),
                                              handshake=SimpleNamespace(protocol_version="2025-11-25")),
                              rid, "tools/call", {"name": "b__echo", "_meta": client}, lambda message: None)
        call = SimpleNamespace(sink=sink, server="b", method="tools/call", params={"name": "echo", "_meta": client},
                               span=None)
        tracing.sending(call, None)
        call.span.end({"content": []})
        sink({"jsonrpc": "2.0", "id": rid, "result": {"content": []}})
    tracing.later.run()  # the spans' records are made and ended off the call path (actors/ops/trace_later.py)
    readables = [record.readable() for record in records]
    ours, theirs = tracing.encoder.request(records), encode_spans(readables).SerializePartialToString()
    same = [MessageToDict(ExportTraceServiceRequest.FromString(body)) for body in (ours, theirs)]
    assert same[0] == same[1], "troupe's encoding decodes as the SDK's"
    per_span = 1e6 / len(records)
    best = {"troupe": lambda: tracing.encoder.request(records),
            "sdk": lambda: encode_spans([record.readable() for record in records]).SerializePartialToString()}
    figures = {label: min(timeit.repeat(fn, number=5, repeat=7)) / 5 * per_span for label, fn in best.items()}
    attributes = sum(len(span["attributes"]) for span in decode(ours)) / len(records)
    print(f"{len(records)} spans, {attributes:.1f} attributes each: "
          f"encode per span: troupe {figures['troupe']:.2f} µs, the SDK's {figures['sdk']:.2f} µs "
          f"(ReadableSpan included)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000, help="calls per way, over all rounds")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", default="trace-bench.json")
    parser.add_argument("--hub", action="store_true", help="measure the export's hold on the gevent hub instead")
    parser.add_argument("--encode", action="store_true", help="time troupe's span encoding against the SDK's")
    args = parser.parse_args(argv)
    if args.hub:
        return hub()
    if args.encode:
        return encode()
    try:
        result = measure(args.calls, args.rounds)
    finally:
        stop_all()
    f = result["figures"]
    own = f["off"]["p50_ms"] - f["direct"]["p50_ms"]
    traced = f["on"]["p50_ms"] - f["off"]["p50_ms"]
    ratio = traced / own if own > 0 else float("inf")
    sampled_ratio = (f["sampled"]["p50_ms"] - f["off"]["p50_ms"]) / own if own > 0 else float("inf")
    result["summary"] = {"troupe_added_p50_ms": own, "tracing_added_p50_ms": traced, "ratio": ratio, "goal": GOAL,
                         "met": ratio < GOAL, "sampled_ratio": sampled_ratio}
    print(f"{'way':<8} {'p50 ms':>8} {'p99 ms':>8} {'cpu ms/call':>12}")
    for way, fig in f.items():
        cpu = result["cpu_ms_per_call"].get(way)
        print(f"{way:<8} {fig['p50_ms']:>8.3f} {fig['p99_ms']:>8.3f} {'' if cpu is None else f'{cpu:.3f}':>12}")
    print(f"troupe's own added p50: {own:.3f} ms; tracing's added p50: {traced:+.3f} ms; "
          f"ratio {ratio:.3f} (goal < {GOAL}: {'PASS' if ratio < GOAL else 'MISS'}); one in ten sampled: "
          f"ratio {sampled_ratio:.3f}")
    print(f"spans received: {result['spans_received']}; troupe's export: {result['tracing']}")
    Path(args.out).write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
