"""troupe's spans as OTLP protobuf bytes (an ExportTraceServiceRequest), written directly from its
span records (actors/ops/spans.py, RecordedSpan): the wire format by hand, with the resource and
scope encoded once and each attribute's key-value bytes kept once seen (most repeat on every
call: the method, the tool, the server, the transport, the outcome).

Not the SDK's encoder: that one builds a ReadableSpan, then a generated protobuf message per span,
attribute and value, in Python: ~26 µs a span here, on the hub's core; this is 3-5 µs (scripts/
trace_bench.py --encode). The bytes decode as the SDK's do (tests/support/otlp_receiver.py reads
them with opentelemetry-proto's own classes).
"""
from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Iterable, Sequence

MAX_CACHED = 4096  # distinct attribute key-values kept encoded; past it the cache starts again
# Attributes whose value is new on (nearly) every span: encoding them once is all there is.
UNCACHED = frozenset({"jsonrpc.request.id", "troupe.cache.age_s", "troupe.attempt"})
KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}  # SpanKind's names → Span.SpanKind
STATUS_UNSET, STATUS_ERROR = b"\x7a\x00", b"\x7a\x02\x18\x02"  # Span.status (15): code UNSET, ERROR
# Span.flags (16, fixed32): the parent's is_remote is known (0x100), and true (0x200) for a client's parent
FLAGS_LOCAL, FLAGS_REMOTE = b"\x85\x01" + struct.pack("<I", 0x100), b"\x85\x01" + struct.pack("<I", 0x300)
_fixed64 = struct.Struct("<Q").pack
_double = struct.Struct("<d").pack
_SMALL = [bytes((n,)) for n in range(0x80)]


def varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag byte(s), the payload's length, the payload."""
    return tag + varint(len(payload)) + payload


def any_value(value: Any) -> bytes:
    """An AnyValue's bytes, as the SDK's encoder types them (a bool before an int: it is one)."""
    if isinstance(value, str):
        return field(b"\x0a", value.encode("utf-8", "surrogatepass"))
    if isinstance(value, bool):
        return b"\x10\x01" if value else b"\x10\x00"
    if isinstance(value, int):
        return b"\x18" + varint(value & 0xFFFFFFFFFFFFFFFF)  # int64: a negative as its two's complement
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, bytes):
        return field(b"\x3a", value)
    if isinstance(value, (list, tuple)):  # ArrayValue (5) of AnyValue (1)
        return field(b"\x2a", b"".join(field(b"\x0a", any_value(v)) for v in value))
    if isinstance(value, Mapping):  # KeyValueList (6) of KeyValue (1)
        return field(b"\x32", b"".join(field(b"\x0a", key_value(str(k), v)) for k, v in value.items()))
    return field(b"\x0a", str(value).encode("utf-8", "surrogatepass"))


def key_value(key: str, value: Any) -> bytes:
    return field(b"\x0a", key.encode("utf-8", "surrogatepass")) + field(b"\x12", any_value(value))


def attributes(tag: bytes, pairs: Mapping[str, Any]) -> bytes:
    """Repeated KeyValue field `tag`, uncached (the resource, the scope: encoded once anyway)."""
    return b"".join(field(tag, key_value(k, v)) for k, v in pairs.items())


class Encoder:
    """Encodes span records for one resource and scope (both fixed for troupe's life): each span
    as it ends (`span`, from trace_export.BatchExport.on_end, in the hub's thread) and batches of
    them (`request_of_encoded`, the export greenlet's). Its caches are written by `span` alone,
    which never yields, so no two greenlets are ever inside it at once."""

    def __init__(self, resource: Mapping[str, Any], resource_schema: str, scope_name: str, scope_version: str) -> None:
        self._resource = field(b"\x0a", attributes(b"\x0a", resource))  # ResourceSpans.resource (1)
        self._resource_schema = field(b"\x1a", resource_schema.encode()) if resource_schema else b""
        scope = field(b"\x0a", scope_name.encode()) + (field(b"\x12", scope_version.encode()) if scope_version else b"")
        self._scope = field(b"\x0a", scope)  # ScopeSpans.scope (1)
        self._attributes: dict = {}
        self._names: dict = {}

    def request(self, spans: Iterable) -> bytes:
        """An ExportTraceServiceRequest of `spans` (RecordedSpan-like: the fields `span` reads)."""
        span = self.span
        return self.request_of_encoded([span(s) for s in spans])

    def request_of_encoded(self, spans: Iterable[bytes]) -> bytes:
        """An ExportTraceServiceRequest of spans `span` has encoded already (each as it ended)."""
        scope_spans = self._scope + b"".join([field(b"\x12", s) for s in spans])
        resource_spans = self._resource + field(b"\x12", scope_spans) + self._resource_schema
        return field(b"\x0a", resource_spans)

    def span(self, s) -> bytes:
        """One Span message: ids, tracestate, parent, name, kind, times, attributes, events, status, flags."""
        parent = s.parent
        name = self._names.get(s.name)
        if name is None:
            name = field(b"\x2a", s.name.encode("utf-8", "surrogatepass"))
            if len(self._names) < MAX_CACHED:
                self._names[s.name] = name
        parts = [b"\x0a\x10", s.trace_id.to_bytes(16, "big"), b"\x12\x08", s.span_id.to_bytes(8, "big")]
        if s.tracestate:
            parts.append(field(b"\x1a", s.tracestate.encode()))
        if parent is not None:
            parts.append(b"\x22\x08")
            parts.append(parent.span_id.to_bytes(8, "big"))
        parts.append(name)
        kind = _KIND.get(s.kind)
        if kind is None:  # an enum member (SpanKind) first seen: keyed by itself from now on
            kind = _KIND[s.kind] = _KIND[s.kind.name]
        parts.append(kind)
        parts.append(b"\x39" + _fixed64(s.start_ns))
        parts.append(b"\x41" + _fixed64(s.end_ns))
        parts.append(self._span_attributes(b"\x4a", s.attributes))
        for event in s.events:
            parts.append(field(b"\x5a", self._event(event)))
        parts.append(STATUS_ERROR if s.error else STATUS_UNSET)
        parts.append(FLAGS_REMOTE if parent is not None and parent.remote else FLAGS_LOCAL)
        return b"".join(parts)

    def _event(self, event: Sequence) -> bytes:
        name, attrs, timestamp = event
        return b"\x09" + _fixed64(timestamp) + field(b"\x12", name.encode("utf-8", "surrogatepass")) + \
            self._span_attributes(b"\x1a", attrs)

    def _span_attributes(self, tag: bytes, pairs: Mapping[str, Any]) -> bytes:
        cache = self._attributes
        out = []
        for key, value in pairs.items():
            if key in UNCACHED:
                out.append(field(tag, key_value(key, value)))
                continue
            slot = (tag, key, type(value), value)  # the type too: True == 1 == 1.0 as keys
            try:
                encoded = cache.get(slot)
            except TypeError:  # an unhashable value (a list): encoded each time
                out.append(field(tag, key_value(key, value)))
                continue
            if encoded is None:
                encoded = field(tag, key_value(key, value))
                if len(cache) >= MAX_CACHED:
                    cache.clear()
                cache[slot] = encoded
            out.append(encoded)
        return b"".join(out)


_KIND: dict = {name: b"\x30" + bytes((number,)) for name, number in KINDS.items()}
