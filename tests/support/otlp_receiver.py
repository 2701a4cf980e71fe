"""A real OTLP/HTTP trace receiver for the tests: POST /v1/traces with an ExportTraceServiceRequest
(protobuf), decoded with opentelemetry-proto into plain span dicts a test can query. Runs on a
loopback port of its own (plain threads), until stopped. `python -m tests.support.otlp_receiver`
runs one in a process of its own (scripts/trace_bench.py: it then takes no time from the process
that measures; `--count-only` counts the spans without decoding them into dicts), announcing its
URL on stderr; GET /spans answers how many it took."""
from __future__ import annotations

import http.server
import threading
import time
from typing import Any, Callable

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

KINDS = {ProtoSpan.SPAN_KIND_SERVER: "SERVER", ProtoSpan.SPAN_KIND_CLIENT: "CLIENT",
         ProtoSpan.SPAN_KIND_INTERNAL: "INTERNAL", ProtoSpan.SPAN_KIND_PRODUCER: "PRODUCER",
         ProtoSpan.SPAN_KIND_CONSUMER: "CONSUMER"}


def _value(any_value) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def _attributes(pairs) -> dict:
    return {kv.key: _value(kv.value) for kv in pairs}


def decode(body: bytes) -> list[dict]:
    """The spans of one export: name, kind, ids (hex), attributes, events, status, service."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append({
                    "name": span.name, "kind": KINDS.get(span.kind, str(span.kind)),
                    "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(), "attributes": _attributes(span.attributes),
                    "events": [{"name": e.name, "attributes": _attributes(e.attributes)} for e in span.events],
                    "status": span.status.code, "service": resource.get("service.name"),
                    "duration_ms": (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6})
    return spans


class OtlpReceiver:
    """The receiver: `url` is its base (troupe adds /v1/traces), `spans` what it has decoded."""

    def __init__(self, count_only: bool = False) -> None:
        self.spans: list[dict] = []
        self.posts = 0
        self.counted = 0  # spans taken (count_only: counted, not decoded into dicts)
        self._count_only = count_only
        self._lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
                if ok:
                    receiver._took(body)
                reply = ExportTraceServiceResponse().SerializeToString() if ok else b""
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def do_GET(self) -> None:
                with receiver._lock:
                    body = str(receiver.counted).encode()
                self.send_response(200 if self.path == "/spans" else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _took(self, body: bytes) -> None:
        if self._count_only:  # the bench's: parsing is C (upb), building dicts would be Python per span
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            spans: list[dict] = []
            count = sum(len(scope.spans) for rs in request.resource_spans for scope in rs.scope_spans)
        else:
            spans = decode(body)
            count = len(spans)
        with self._lock:
            self.spans.extend(spans)
            self.counted += count
            self.posts += 1

    def all(self) -> list[dict]:
        with self._lock:
            return list(self.spans)

    def wait_for(self, predicate: Callable[[list[dict]], Any], timeout: float = 15.0) -> Any:
        """The first truthy predicate(spans so far), polled until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            found = predicate(self.all())
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"spans not received within {timeout}s; got: "
                                     + ", ".join(f"{s['kind']} {s['name']}" for s in self.all()))
            time.sleep(0.05)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    import sys

    receiver = OtlpReceiver(count_only="--count-only" in sys.argv)
    print(f"otlp-receiver: serving {receiver.url}/v1/traces", file=sys.stderr, flush=True)
    receiver._thread.join()


if __name__ == "__main__":
    main()
