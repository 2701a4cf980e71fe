"""W3C trace context in MCP's _meta and in HTTP headers (actors/ops/trace_context.py), and the
telemetry config with the standard OTEL_* variables (actors/ops/trace_settings.py)."""
from __future__ import annotations

import pytest

from actors.ops import trace_context as tc
from actors.ops import trace_settings as ts
from actors.settings.config import ConfigError, from_data

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OTHER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.mark.parametrize("value, ok", [
    (PARENT, True),
    ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", False),  # uppercase
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),  # zero trace id
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),  # zero span id
    ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),  # version ff
    (PARENT + "-extra", False), (PARENT[:-1], False), (None, False), (42, False), ("", False),
])
def test_a_traceparent_is_taken_only_in_its_w3c_form(value, ok):
    assert tc.valid_traceparent(value) is ok


def test_the_carrier_of_a_request_is_its_meta_traceparent_and_tracestate_when_well_formed():
    assert tc.carrier_of({"_meta": {"traceparent": PARENT, "tracestate": "a=1", "progressToken": 3}}) == \
        {"traceparent": PARENT, "tracestate": "a=1"}
    assert tc.carrier_of({"_meta": {"traceparent": PARENT, "tracestate": "a=1\r\nX-Evil: 1"}}) == {"traceparent": PARENT}
    assert tc.carrier_of({"_meta": {"traceparent": PARENT, "tracestate": "x" * 600}}) == {"traceparent": PARENT}
    assert tc.carrier_of({"_meta": {"traceparent": "garbage", "tracestate": "a=1"}}) == {}
    assert tc.carrier_of({"_meta": ["traceparent"]}) == {}
    assert tc.carrier_of({"name": "t"}) == {} and tc.carrier_of(None) == {}


def test_troupes_context_replaces_the_clients_in_meta_and_keeps_every_other_key():
    params = {"name": "t", "arguments": {"x": 1}, "_meta": {"traceparent": PARENT, "tracestate": "a=1", "k": "v"}}
    out = tc.with_context(params, {"traceparent": OTHER})
    assert out == {"name": "t", "arguments": {"x": 1}, "_meta": {"k": "v", "traceparent": OTHER}}
    assert params["_meta"]["traceparent"] == PARENT  # the call's own params are not touched (a retry reuses them)
    assert tc.with_context({"uri": "file:///a"}, {"traceparent": OTHER, "tracestate": "b=2"}) == \
        {"uri": "file:///a", "_meta": {"traceparent": OTHER, "tracestate": "b=2"}}
    assert tc.with_context(None, {"traceparent": OTHER}) == {"_meta": {"traceparent": OTHER}}


def test_an_http_upstream_gets_the_meta_context_mirrored_in_its_headers():
    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "t", "_meta": {"traceparent": OTHER, "tracestate": "b=2"}}}
    assert tc.headers_of(request) == {"traceparent": OTHER, "tracestate": "b=2"}
    assert tc.headers_of({"jsonrpc": "2.0", "id": 1, "method": "ping"}) == {}
    assert tc.headers_of({"jsonrpc": "2.0", "method": "notifications/initialized", "params": {"_meta": {}}}) == {}
    bad = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": {"traceparent": "a\r\nb: c"}}}
    assert tc.headers_of(bad) == {}  # never a header troupe did not check


def _call(meta=None) -> dict:
    params: dict = {"name": "t", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def test_an_http_fronts_traceparent_header_becomes_the_requests_meta_unless_meta_has_one():
    environ = {"HTTP_TRACEPARENT": PARENT, "HTTP_TRACESTATE": "a=1"}
    msg = _call()
    tc.header_into_meta(environ, msg)
    assert msg["params"]["_meta"] == {"traceparent": PARENT, "tracestate": "a=1"}
    msg = _call({"progressToken": 5})
    tc.header_into_meta({"HTTP_TRACEPARENT": PARENT}, msg)
    assert msg["params"]["_meta"] == {"progressToken": 5, "traceparent": PARENT}
    own = _call({"traceparent": OTHER})
    tc.header_into_meta(environ, own)
    assert own["params"]["_meta"] == {"traceparent": OTHER}  # the message's own context wins, tracestate too
    for untouched in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                      {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, [_call()]):
        before = repr(untouched)
        tc.header_into_meta(environ, untouched)
        assert repr(untouched) == before
    bad = _call()
    tc.header_into_meta({"HTTP_TRACEPARENT": "nonsense"}, bad)
    assert "_meta" not in bad["params"]
    no_params = {"jsonrpc": "2.0", "id": 2, "method": "resources/read"}
    tc.header_into_meta({"HTTP_TRACEPARENT": PARENT}, no_params)
    assert no_params["params"] == {"_meta": {"traceparent": PARENT}}


def test_the_collector_is_the_configs_then_the_traces_variable_then_the_base_variable():
    none = ts.TelemetryConfig()
    assert ts.traces_url(none, {}) is None
    assert ts.traces_url(none, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}) == "http://c:4318/v1/traces"
    assert ts.traces_url(none, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/",
                                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/custom"}) == "http://t:4318/custom"
    configured = ts.TelemetryConfig(otlp_endpoint="http://mine:4318")
    assert ts.traces_url(configured, {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/x"}) == \
        "http://mine:4318/v1/traces"
    assert ts.traces_url(ts.TelemetryConfig(otlp_endpoint="http://mine:4318/v1/traces"), {}) == \
        "http://mine:4318/v1/traces"
    assert ts.traces_url(configured, {"OTEL_SDK_DISABLED": "true"}) is None
    assert ts.traces_url(none, {"OTEL_EXPORTER_OTLP_ENDPOINT": "not a url"}) is None
    assert ts.service_name(none, {}) == "troupe"
    assert ts.service_name(none, {"OTEL_SERVICE_NAME": "gw"}) == "gw"
    assert ts.service_name(ts.TelemetryConfig(service_name="mine"), {"OTEL_SERVICE_NAME": "gw"}) == "mine"


def test_the_telemetry_section_is_checked_key_by_key():
    config = from_data({"servers": [], "telemetry": {"otlp_endpoint": "http://127.0.0.1:4318",
                                                     "service_name": "gw", "export_timeout_s": 1}})
    assert config.telemetry == ts.TelemetryConfig("http://127.0.0.1:4318", "gw", 1.0)
    assert from_data({"servers": []}).telemetry == ts.TelemetryConfig()
    with pytest.raises(ConfigError) as err:
        from_data({"servers": [], "telemetry": {"otlp_endpoint": "ftp://x", "service_name": "",
                                                "export_timeout_s": 0, "colour": "red"}})
    text = str(err.value)
    for key in ("telemetry.otlp_endpoint", "telemetry.service_name", "telemetry.export_timeout_s",
                "telemetry.colour"):
        assert key in text, text
    with pytest.raises(ConfigError):
        from_data({"servers": [], "telemetry": "http://x"})


def test_without_a_collector_troupe_never_imports_opentelemetry():
    """Tracing off costs nothing: not even the import (a fresh interpreter, troupe's serving modules)."""
    import os
    import subprocess
    import sys

    code = ("import sys\n"
            "import actors.main, actors.runtime, actors.downstream.session, actors.serve.http\n"
            "from actors.ops import trace_settings, trace_wiring\n"
            "assert trace_wiring.start(trace_settings.TelemetryConfig(), 'stdio') is None\n"
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0 and done.stdout.strip() == "[]", done
