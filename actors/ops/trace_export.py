"""The background export of troupe's spans: a batch processor of troupe's own (BatchExport, for
the reason its docstring gives) in front of an OTLP/HTTP (protobuf) exporter (RecordExporter:
troupe's span records encoded by otlp_encode, posted by the SDK's exporter's HTTP client), both
counting what was exported and what was dropped, so /metrics shows a collector that is down
instead of the spans silently going missing.

Under gevent the processor's worker thread is a greenlet and the exporter's POST goes through
gevent's sockets (requests), so an export never blocks a call; it waits `export_timeout_s` at
most for the collector (retries included), then drops that batch.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Sequence

from loguru import logger
from opentelemetry import context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from actors.ops.otlp_encode import Encoder
from actors.transports.http_base import lean_session

# The SDK's defaults. Spans are encoded one at a time as they end (BatchExport's `encode`), so a
# batch's own CPU on the hub is joining and posting it (scripts/trace_bench.py --hub measures the
# hold); each POST costs about a millisecond of CPU on either side whatever its size, so a batch is
# no smaller than it must be.
MAX_EXPORT_BATCH = 512
FLUSH_POLL_S = 0.01
MAX_QUEUE = 2048  # spans waiting for export; past it the oldest is dropped (and counted)
SCHEDULE_DELAY_MS = 1000  # a quiet troupe's spans reach the collector within about a second
# The SDK's exporter logs each failed export (a line a second or more while a collector is down);
# troupe counts them and logs the change of state once (CountingExporter).
QUIETED = (("opentelemetry.exporter.otlp.proto.http.trace_exporter", logging.CRITICAL),)


class ExportCounts:
    """Counts of the export, written by the greenlets that end spans (`dropped` when the queue is
    full) and by the export greenlet (`exported`, `dropped`, `failures`): every write takes the
    lock, so no count depends on who runs when. Read by the status report."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._exported = self._dropped = self._failures = 0

    def add(self, exported: int = 0, dropped: int = 0, failures: int = 0) -> None:
        with self._lock:
            self._exported += exported
            self._dropped += dropped
            self._failures += failures

    def snapshot(self, queued: int) -> dict:
        with self._lock:
            return {"spans_exported": self._exported, "spans_dropped": self._dropped,
                    "export_failures": self._failures, "spans_queued": queued}


class CountingExporter(SpanExporter):
    """The OTLP exporter, counting each batch as exported or dropped; an exporter that raises
    drops its batch too (the processor would only log it). Logs when exports start failing and
    when they work again, once each (`_failing`: only the export greenlet calls export)."""

    def __init__(self, inner: SpanExporter, counts: ExportCounts) -> None:
        self._inner, self._counts = inner, counts
        self._failing = False

    def export(self, spans: Sequence) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:  # the SDK's exporter catches its own errors; this is a net for the rest
            result = SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self._counts.add(exported=len(spans))
            if self._failing:
                self._failing = False
                logger.info("tracing: the collector takes spans again")
        else:
            self._counts.add(dropped=len(spans), failures=1)
            if not self._failing:
                self._failing = True
                logger.warning("tracing: an export to the collector failed; spans are dropped (counted in "
                               "/metrics as troupe_trace_spans_dropped_total) until it takes them again")
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class RecordExporter(SpanExporter):
    """Exports batches of troupe's span records (spans.RecordedSpan): encoded by otlp_encode,
    posted by the SDK's OTLP exporter's own HTTP client (its retries, timeout, headers,
    compression and certificates, from the OTEL_EXPORTER_OTLP_* variables as ever). An SDK
    without that client (older than 1.39) gets ReadableSpans to encode and post itself."""

    def __init__(self, sdk: OTLPSpanExporter, encoder: Encoder) -> None:
        self._sdk, self._encoder = sdk, encoder
        client = getattr(sdk, "_client", None)
        self._post = getattr(client, "export", None)
        # each span is encoded as it ends (off the call path: trace_later) when troupe posts itself
        self.encode = encoder.span if self._post is not None else None
        self._max_size = getattr(sdk, "_max_request_size", 0)
        self._stopped = False

    def export(self, spans: Sequence) -> SpanExportResult:
        """`spans`: span records, or their encodings (BatchExport encodes each as it ends)."""
        if self._stopped:
            return SpanExportResult.FAILURE
        if self._post is None:
            return self._sdk.export([span.readable() for span in spans])
        data = self._encoder.request_of_encoded(spans) if spans and type(spans[0]) is bytes else \
            self._encoder.request(spans)
        if 0 < self._max_size < len(data):  # as the SDK's exporter: a batch past the limit is dropped
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS if self._post(data).success else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._stopped = True
        self._sdk.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is buffered here


class BatchExport(SpanProcessor):
    """troupe's batch span processor: ended spans queue here (at most `max_queue`; past it the
    oldest is dropped and counted) and one worker thread, a greenlet once troupe has patched,
    exports them `batch` at a time, at least every `delay_s` and at once when a batch is full.

    Not the SDK's BatchSpanProcessor: that one registers an at-fork hook that starts a new worker
    thread in the child, and troupe forks for every stdio server it launches (gevent's subprocess
    forks in Python, so the hooks run). Under gevent starting a thread switches to the hub, so the
    child, before it reached exec, ran troupe's other greenlets: a second `troupe: serving` line,
    and connections the child accepted and reset (seen in tests/e2e/test_traces.py). This one has
    no fork hook (nor has troupe's span recorder, actors/ops/spans.py, which needs no provider).

    The queue is a deque: its appends (any greenlet ending a span) and pops (the worker) are
    thread-safe by the deque's own contract, and a full deque drops its oldest on append itself.
    It takes troupe's span records themselves (`takes_records`), ended and sampled: no
    ReadableSpan is made for it. With `encode`, each is encoded as it ends and its bytes wait in
    the queue: the spans' encoding is spread over the hub's idle turns after each call
    (trace_later) instead of holding the hub for a whole batch at once; the export greenlet only
    joins and posts them."""

    takes_records = True

    def __init__(self, exporter: SpanExporter, counts: ExportCounts, *, max_queue: int = MAX_QUEUE,
                 batch: int = MAX_EXPORT_BATCH, delay_s: float = SCHEDULE_DELAY_MS / 1000,
                 encode: Callable[[Any], bytes] | None = None) -> None:
        self._exporter, self._counts, self._batch, self._delay = exporter, counts, batch, delay_s
        self._encode = encode
        self._queue: collections.deque = collections.deque(maxlen=max_queue)
        self._wake = threading.Event()
        self._stopping = False
        self._worker = threading.Thread(target=self._run, name="troupe-trace-export", daemon=True)
        self._worker.start()

    def queued(self) -> int:
        return len(self._queue)

    def on_start(self, span, parent_context=None) -> None:
        pass

    def on_end(self, span) -> None:
        if self._stopping:  # (the recorder hands on sampled spans alone)
            return
        queue = self._queue
        if len(queue) == queue.maxlen:
            self._counts.add(dropped=1)  # the append below pushes the oldest out
        queue.append(span if self._encode is None else self._encode(span))
        if len(queue) >= self._batch:
            self._wake.set()

    def _run(self) -> None:
        # The export's own requests are no spans of a host app's requests instrumentation.
        context.attach(context.set_value(context._SUPPRESS_INSTRUMENTATION_KEY, True))
        while not self._stopping:
            self._wake.wait(self._delay)
            self._wake.clear()
            self._export_queued()
        self._export_queued()

    def _export_queued(self) -> None:
        queue = self._queue
        while queue:
            batch = []
            while queue and len(batch) < self._batch:
                batch.append(queue.popleft())
            self._exporter.export(batch)  # counted by the CountingExporter, which never raises

    def shutdown(self, timeout_millis: int = 30000) -> None:
        """Export what is queued, waiting `timeout_millis` at most; what is left then is dropped
        and counted, and an export still waiting on the collector is ended."""
        self._stopping = True
        self._wake.set()
        self._worker.join(timeout_millis / 1000)
        left = len(self._queue)
        self._queue.clear()
        if left:
            self._counts.add(dropped=left)
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wake the worker and wait (bounded) until the queue is empty."""
        self._wake.set()
        waited = 0.0
        while self._queue and waited < timeout_millis / 1000:
            time.sleep(FLUSH_POLL_S)  # gevent's sleep once troupe has patched
            waited += FLUSH_POLL_S
        return not self._queue


def start_export(url: str, timeout_s: float, counts: ExportCounts, encoder: Encoder) -> BatchExport:
    """The counted batch export of spans to `url` (OTLP/HTTP protobuf, by `encoder`), its
    greenlet started. Headers, certificates and compression come from the OTEL_EXPORTER_OTLP_*
    variables, read by the SDK's exporter itself."""
    for name, level in QUIETED:
        logging.getLogger(name).setLevel(level)
    exporter = OTLPSpanExporter(endpoint=url, timeout=timeout_s, session=lean_session(url))
    records = RecordExporter(exporter, encoder)
    return BatchExport(CountingExporter(records, counts), counts, encode=records.encode)
