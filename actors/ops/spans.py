"""troupe's spans, recorded the cheap way: a few slots per span while it runs, and at its end the
record itself handed to troupe's export (trace_export.BatchExport, which encodes records straight
to OTLP: otlp_encode); any other span processor (a test's in-memory exporter) gets an SDK
ReadableSpan made from the record, and only when there is one.

Not the SDK's Tracer: with it troupe's hooks cost 66 µs of CPU per traced call here (two spans:
sampler, bounded attributes with their locks, context objects) against 9-10 µs this way, when a
tools/call through troupe adds 120-180 µs in all (scripts/trace_bench.py); nor its
TracerProvider, whose at-fork hook re-detects
the resource through a thread pool, which under gevent can run troupe's greenlets in the child
of every stdio server's launch (trace_export.BatchExport says how that happened).

Sampling follows OTEL_TRACES_SAMPLER / OTEL_TRACES_SAMPLER_ARG as the SDK reads them
(always_on, always_off, traceidratio and their parentbased_ forms; parentbased_always_on by
default: a client's sampled flag is followed, every trace troupe starts is recorded). An
unsampled span records nothing and is never exported; its context still travels on.
"""
from __future__ import annotations

import random
import time
from typing import Any, Mapping, NamedTuple, Protocol

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from actors import __version__
from actors.ops import trace_context

SAMPLED, RANDOM = 0x01, 0x02  # W3C trace-flags: sampled; level 2's random trace id (troupe's are)
_FLAGS = {flags: TraceFlags(flags) for flags in range(256)}
_UNSET, _ERROR = Status(StatusCode.UNSET), Status(StatusCode.ERROR)
_ID_SPACE = 1 << 64
_random_bits = random.getrandbits
SAMPLERS = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
            "parentbased_traceidratio")


class Parent(NamedTuple):
    """A span's parent as W3C context carries it: ids, flags, the vendors' tracestate, and whether
    it came from outside troupe (the client's span) or is one of troupe's own."""

    trace_id: int
    span_id: int
    flags: int
    tracestate: str
    remote: bool


class Context(Protocol):
    """What a span's children need of it: a Parent, a RecordedSpan, or a traced request
    (tracing.RequestTrace) whose SERVER span is not made yet."""

    @property
    def trace_id(self) -> int: ...
    @property
    def span_id(self) -> int: ...
    @property
    def flags(self) -> int: ...
    @property
    def tracestate(self) -> str: ...
    @property
    def remote(self) -> bool: ...


def parent_of(carrier: Mapping[str, str]) -> Parent | None:
    """The client's context from a carrier trace_context.carrier_of checked (None: none there)."""
    parent = carrier.get(trace_context.TRACEPARENT)
    if parent is None:
        return None
    _, trace_id, span_id, flags = parent.split("-")
    return Parent(int(trace_id, 16), int(span_id, 16), int(flags, 16), carrier.get(trace_context.TRACESTATE, ""),
                  True)


def parent_in(meta) -> Parent | None:
    """The client's context from a request's _meta, as parent_of(trace_context.carrier_of(...))
    reads it (a malformed traceparent is none; a malformed tracestate is dropped), in one pass."""
    parent = meta.get(trace_context.TRACEPARENT) if isinstance(meta, dict) else None
    if parent is None or not trace_context.valid_traceparent(parent):
        return None
    state = meta.get(trace_context.TRACESTATE)
    return Parent(int(parent[3:35], 16), int(parent[36:52], 16), int(parent[53:55], 16),
                  state if state and trace_context.valid_tracestate(state) else "", True)


class Sampler:
    """Which new traces are recorded, and whether a child follows its parent's flag."""

    def __init__(self, env: Mapping[str, str]) -> None:
        name = env.get("OTEL_TRACES_SAMPLER", "").strip().lower() or "parentbased_always_on"
        if name not in SAMPLERS:
            name = "parentbased_always_on"  # as the SDK does with a name it does not know
        self.follows_parent = name.startswith("parentbased_")
        root = name.removeprefix("parentbased_")
        ratio = 1.0 if root == "always_on" else 0.0 if root == "always_off" else _ratio(env)
        self._bound = int(ratio * _ID_SPACE)  # traceidratio: the low 64 bits of the trace id below it

    def sampled(self, trace_id: int, parent: Context | None) -> bool:
        if parent is not None and self.follows_parent:
            return bool(parent.flags & SAMPLED)
        return (trace_id & (_ID_SPACE - 1)) < self._bound


def _ratio(env: Mapping[str, str]) -> float:
    try:
        value = float(env.get("OTEL_TRACES_SAMPLER_ARG", "1.0"))
    except ValueError:
        return 1.0
    return min(1.0, max(0.0, value))


class SpanRecorder:
    """Starts troupe's spans and hands each ended, sampled one to its processors. Immutable once
    set up (`add_processor` is for set-up and tests, before spans flow): shared by every Session."""

    def __init__(self, service_name: str, env: Mapping[str, str]) -> None:
        self.resource = Resource.create({"service.name": service_name, "service.version": __version__})
        self.scope = InstrumentationScope("troupe", __version__)
        self.sampler = Sampler(env)
        self.takers: tuple = ()  # processors that take the records themselves (`takes_records`)
        self.processors: tuple = ()  # the SDK's kind: each gets a ReadableSpan

    def add_processor(self, processor) -> None:
        if getattr(processor, "takes_records", False):
            self.takers = (*self.takers, processor)
        else:
            self.processors = (*self.processors, processor)

    def start(self, name: str, kind: SpanKind, parent: Context | None, attributes: dict) -> RecordedSpan:
        """A span begun now, child of `parent` (None: a trace of its own), its own context ready."""
        trace_id, span_id, flags, state = self.child_ids(parent)
        return RecordedSpan(self, name, kind, trace_id, span_id, parent, flags, state, attributes)

    def child_ids(self, parent: Context | None) -> tuple[int, int, int, str]:
        """(trace id, span id, flags, tracestate) of a span begun now as `parent`'s child: what
        the next hop needs of it, before (or without) its RecordedSpan."""
        span_id = _random_bits(64) or 1
        if parent is None:
            trace_id = _random_bits(128) or 1
            return trace_id, span_id, RANDOM | (SAMPLED if self.sampler.sampled(trace_id, None) else 0), ""
        trace_id = parent.trace_id
        if self.sampler.follows_parent:  # the default: the parent's sampled flag is the child's
            return trace_id, span_id, parent.flags, parent.tracestate
        flags = (parent.flags & ~SAMPLED) | (SAMPLED if self.sampler.sampled(trace_id, parent) else 0)
        return trace_id, span_id, flags, parent.tracestate


class RecordedSpan:
    """One span while it runs: set_attribute, add_event, set_error, then end() once (a second
    end does nothing: `_once.pop()` is atomic, so this holds whoever ends it). Its `parent_context`
    is what its children and the next hop take."""

    __slots__ = ("_recorder", "name", "kind", "trace_id", "span_id", "parent", "flags", "tracestate",
                 "start_ns", "end_ns", "attributes", "events", "error", "_once")
    remote = False  # as a parent (a Parent's fields: ids, flags, tracestate), one of troupe's own

    def __init__(self, recorder: SpanRecorder, name: str, kind: SpanKind, trace_id: int, span_id: int,
                 parent: Context | None, flags: int, tracestate: str, attributes: dict,
                 start_ns: int | None = None) -> None:
        self._recorder, self.name, self.kind = recorder, name, kind
        self.trace_id, self.span_id, self.parent, self.flags = trace_id, span_id, parent, flags
        self.tracestate, self.attributes = tracestate, attributes
        self.events: list = []
        self.error = False
        self._once = [True]
        self.start_ns = start_ns if start_ns is not None else time.time_ns()  # given: begun earlier
        self.end_ns = 0

    def set_attribute(self, key: str, value: Any) -> None:
        self.attributes[key] = value

    def add_event(self, name: str, attributes: dict) -> None:
        self.events.append((name, attributes, time.time_ns()))

    def set_error(self) -> None:
        self.error = True

    def parent_context(self) -> Parent:
        return Parent(self.trace_id, self.span_id, self.flags, self.tracestate, False)

    def carrier(self) -> dict[str, str]:
        """This span's W3C context, to put in a request's _meta (and an HTTP upstream's headers)."""
        out = {trace_context.TRACEPARENT: f"00-{self.trace_id:032x}-{self.span_id:016x}-{self.flags:02x}"}
        if self.tracestate:
            out[trace_context.TRACESTATE] = self.tracestate
        return out

    def end(self, at_ns: int | None = None) -> None:
        """End the span (at `at_ns`, when the call path took its end's time and left the rest
        for later: trace_later), handing it to the processors when it is sampled."""
        try:
            self._once.pop()
        except IndexError:
            return  # ended already
        if not self.flags & SAMPLED:
            return
        self.end_ns = at_ns if at_ns is not None else time.time_ns()
        recorder = self._recorder
        for taker in recorder.takers:
            taker.on_end(self)
        if recorder.processors:
            readable = self.readable()
            for processor in recorder.processors:
                processor.on_end(readable)

    def readable(self) -> ReadableSpan:
        """This ended span as the SDK's ReadableSpan, for a processor of the SDK's kind."""
        state = TraceState.from_header([self.tracestate]) if self.tracestate else None
        parent = self.parent
        return ReadableSpan(
            self.name, SpanContext(self.trace_id, self.span_id, False, _FLAGS[self.flags], state),
            SpanContext(parent.trace_id, parent.span_id, parent.remote, _FLAGS[parent.flags & 0xFF], state)
            if parent is not None else None,
            self._recorder.resource, self.attributes,
            tuple(Event(name, attributes, timestamp) for name, attributes, timestamp in self.events), (),
            self.kind, None, _ERROR if self.error else _UNSET, self.start_ns, self.end_ns, self._recorder.scope)
