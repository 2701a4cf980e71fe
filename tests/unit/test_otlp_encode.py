"""troupe's own OTLP encoding (actors/ops/otlp_encode.py) against the SDK's: the same spans, as
troupe records them, decode to the same ExportTraceServiceRequest whichever encoded them, whatever
the span carries (parents local and remote, a tracestate, events, an error, every attribute type
troupe or a host app may set), with the attribute cache full or cold; and the exporter that posts
the bytes falls back to the SDK's own encoding when the SDK has no HTTP client to hand them to."""
from __future__ import annotations

from types import SimpleNamespace

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanKind

from actors.ops import otlp_encode
from actors.ops.spans import Parent, SpanRecorder, parent_in
from actors.ops.trace_export import RecordExporter

CLIENT = Parent(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, 1, "vendor=abc,other=x:y", True)
ATTRIBUTES = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "srv__wérk ☃", "jsonrpc.request.id": "7",
              "troupe.attempt": 2, "rpc.jsonrpc.error_code": -32602, "big": (1 << 63) - 1, "yes": True, "no": False,
              "one": 1, "ratio": 1.5, "tags": ["a", "b"], "codes": (1, 2), "blob": b"\x00\x01", "empty": ""}


def _recorded(count: int = 12) -> tuple[SpanRecorder, list]:
    recorder = SpanRecorder("unit", {})
    records: list = []
    recorder.add_processor(SimpleNamespace(on_end=records.append, takes_records=True))
    kinds = (SpanKind.SERVER, SpanKind.CLIENT, SpanKind.INTERNAL, SpanKind.PRODUCER, SpanKind.CONSUMER)
    for i in range(count):
        parent = (CLIENT, None, CLIENT._replace(remote=False, tracestate=""))[i % 3]
        span = recorder.start(f"tools/call t{i % 4}", kinds[i % len(kinds)], parent, dict(ATTRIBUTES, n=i))
        if i % 2:
            span.add_event("troupe.retry", {"troupe.attempt": i, "troupe.server": "srv"})
            span.add_event("troupe.cache.hit", {})
        if i % 4 == 3:
            span.set_error()
        span.end()
    return recorder, records


def _decoded(body: bytes) -> dict:
    return MessageToDict(ExportTraceServiceRequest.FromString(body))


def _encoder(recorder: SpanRecorder) -> otlp_encode.Encoder:
    resource, scope = recorder.resource, recorder.scope
    return otlp_encode.Encoder(resource.attributes, resource.schema_url, scope.name, scope.version or "")


def test_troupes_encoding_decodes_as_the_sdks_does():
    recorder, records = _recorded()
    encoder = _encoder(recorder)
    sdk = _decoded(encode_spans([record.readable() for record in records]).SerializePartialToString())
    first = encoder.request(records)
    assert _decoded(first) == sdk
    assert encoder.request(records) == first  # from the attribute cache: the same bytes
    spans = sdk["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert len(spans) == 12 and spans[0]["traceState"] == CLIENT.tracestate and "traceState" not in spans[1]
    assert {span["status"].get("code") for span in spans} == {"STATUS_CODE_ERROR", None}


def test_a_full_attribute_cache_starts_again_and_still_encodes_every_value(monkeypatch):
    monkeypatch.setattr(otlp_encode, "MAX_CACHED", 3)
    recorder, records = _recorded(6)
    encoder = _encoder(recorder)
    sdk = _decoded(encode_spans([record.readable() for record in records]).SerializePartialToString())
    assert _decoded(encoder.request(records)) == sdk
    assert _decoded(encoder.request(records[::-1])) != sdk  # (the comparison can tell spans apart)
    assert len(encoder._attributes) <= 3


def test_a_clients_meta_context_is_read_in_one_pass_as_before():
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert parent_in({"traceparent": traceparent, "tracestate": "vendor=abc,other=x:y"}) == CLIENT
    assert parent_in({"traceparent": traceparent, "tracestate": "bad\nstate"}) == CLIENT._replace(tracestate="")
    for meta in (None, [], {}, {"traceparent": traceparent.upper()}, {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"},
                 {"traceparent": traceparent.replace("-01", "-1")}, {"traceparent": 5}):
        assert parent_in(meta) is None


class _Sdk:
    """The SDK's exporter as a stand-in: with an HTTP client (`answers`: its success per POST) or without."""

    def __init__(self, *answers, client: bool = True):
        self.posted, self.exported, self.stopped = [], [], False
        if client:
            self._client = SimpleNamespace(export=lambda data: self.posted.append(data) or
                                           SimpleNamespace(success=answers[len(self.posted) - 1]))
        self._max_request_size = 64 << 20

    def export(self, spans):
        self.exported.append(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self):
        self.stopped = True


def test_the_exporter_posts_troupes_bytes_and_says_how_the_collector_answered():
    recorder, records = _recorded(4)
    sdk = _Sdk(True, False)
    exporter = RecordExporter(sdk, _encoder(recorder))  # type: ignore[arg-type]
    assert exporter.export(records) is SpanExportResult.SUCCESS
    assert exporter.export(records) is SpanExportResult.FAILURE
    assert _decoded(sdk.posted[0]) == _decoded(encode_spans([r.readable() for r in records]).SerializePartialToString())
    exporter.shutdown()
    assert sdk.stopped and exporter.export(records) is SpanExportResult.FAILURE and len(sdk.posted) == 2


def test_a_batch_past_the_sdks_size_limit_is_dropped_unposted():
    recorder, records = _recorded(4)
    sdk = _Sdk(True)
    sdk._max_request_size = 10
    exporter = RecordExporter(sdk, _encoder(recorder))  # type: ignore[arg-type]
    assert exporter.export(records) is SpanExportResult.FAILURE and sdk.posted == []


def test_an_sdk_without_its_http_client_encodes_readable_spans_itself():
    recorder, records = _recorded(3)
    sdk = _Sdk(client=False)
    exporter = RecordExporter(sdk, _encoder(recorder))  # type: ignore[arg-type]
    assert exporter.export(records) is SpanExportResult.SUCCESS
    (given,) = sdk.exported
    assert [span.name for span in given] == [record.name for record in records]
    assert [span.context.span_id for span in given] == [record.span_id for record in records]
